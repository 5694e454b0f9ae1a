package org.ldpstream.sdk;

import java.io.File;
import java.lang.reflect.Method;

/** Where the default store lives, and file modes: the JVM and Android. */
final class Platform {
  private Platform() {}

  static boolean isAndroid() {
    String vm = System.getProperty("java.vm.vendor", "") + System.getProperty("java.vendor", "");
    return vm.contains("Android") || System.getProperty("java.runtime.name", "")
        .contains("Android");
  }

  /**
   * The default store file: Android — {@code <files dir>/ldpstream-device-store.json} of the
   * running application; the JVM — {@code <user data dir>/ldpstream/device-store.json}, the
   * path of Python's platformdirs ({@code $XDG_DATA_HOME} or {@code ~/.local/share} on Linux,
   * {@code ~/Library/Application Support} on macOS, {@code %LOCALAPPDATA%} on Windows).
   */
  static File defaultStoreFile() {
    if (isAndroid()) {
      try {
        Class<?> at = Class.forName("android.app.ActivityThread");
        Object app = at.getMethod("currentApplication").invoke(null);
        Method files = app.getClass().getMethod("getFilesDir");
        return new File((File) files.invoke(app), DeviceStore.FILE_NAME);
      } catch (ReflectiveOperationException | RuntimeException e) {
        throw new IllegalStateException("no application context to find the app's files "
            + "directory: use DeviceStore.inDirectory(context.getFilesDir())", e);
      }
    }
    return new File(new File(userDataDir(System.getProperty("os.name", ""),
        System.getenv("XDG_DATA_HOME"), System.getenv("LOCALAPPDATA"),
        System.getProperty("user.home", ".")), "ldpstream"), "device-store.json");
  }

  static File userDataDir(String os, String xdg, String localAppData, String home) {
    String name = os.toLowerCase(java.util.Locale.ROOT);
    if (name.startsWith("windows")) {
      return localAppData != null && !localAppData.isEmpty() ? new File(localAppData)
          : new File(home, "AppData" + File.separator + "Local");
    }
    if (name.startsWith("mac")) {
      return new File(home, "Library" + File.separator + "Application Support");
    }
    return xdg != null && !xdg.trim().isEmpty() ? new File(xdg.trim())
        : new File(home, ".local" + File.separator + "share");
  }

  /** rw------- (as far as java.io.File can say it). */
  static void privateFile(File f) {
    f.setReadable(false, false);
    f.setReadable(true, true);
    f.setWritable(false, false);
    f.setWritable(true, true);
  }

  /** rwx------. */
  static void privateDir(File d) {
    privateFile(d);
    d.setExecutable(false, false);
    d.setExecutable(true, true);
  }
}
