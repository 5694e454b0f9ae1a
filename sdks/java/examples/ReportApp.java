import java.io.File;
import org.ldpstream.sdk.CollectionSpec;
import org.ldpstream.sdk.Device;
import org.ldpstream.sdk.DeviceStore;
import org.ldpstream.sdk.GatewayClient;

/**
 * A plain Java app reporting one value with the ldpstream SDK, as a developer would write it
 * (on Android the same code runs off the UI thread, with the app's files directory):
 *
 * <pre>
 *   javac -cp ldpstream-sdk-0.2.0.jar ReportApp.java
 *   java -cp ldpstream-sdk-0.2.0.jar:. ReportApp https://api.example.org \
 *       https://ingest.example.org app-version 3.2.1 [store-directory]
 * </pre>
 *
 * It fetches the collection's spec (verified against its fingerprint and ldpcore's parameter
 * ranges), makes this window's report — the permanent answer derived from the device secret in
 * the store — queues it, and posts the queue to the gateway. Run it as often as you like: the
 * cadence and the answer are the store's.
 */
public final class ReportApp {
  private ReportApp() {}

  public static void main(String[] args) throws Exception {
    String api = args[0];
    String gateway = args[1];
    CollectionSpec spec = CollectionSpec.fetch(api, args[2]);
    Object value = "categories".equals(spec.domainKind) ? args[3]
        : (Object) Double.valueOf(args[3]);
    // The platform's private store: under the user data directory on the JVM. On Android:
    //   DeviceStore store = DeviceStore.inDirectory(context.getFilesDir());
    DeviceStore store = args.length > 4 ? DeviceStore.inDirectory(new File(args[4]))
        : DeviceStore.defaultStore();
    Device device = Device.builder(spec).store(store).build();
    boolean queued = device.enqueue(value);
    GatewayClient client = new GatewayClient(gateway, System.getenv("LDP_DEVICE_KEY"));
    GatewayClient.QueueResult r = client.sendQueued(store);
    System.out.println("{\"queued\":" + queued + ",\"sent\":" + r.sent + ",\"pending\":"
        + r.pending + ",\"refused\":" + r.refused + ",\"dropped\":" + r.dropped + "}");
  }
}
