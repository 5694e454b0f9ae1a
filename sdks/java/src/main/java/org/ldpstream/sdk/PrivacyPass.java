package org.ldpstream.sdk;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.math.BigInteger;
import java.net.HttpURLConnection;
import java.net.URL;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Privacy Pass for devices (docs/privacy-pass.md): RFC 9578 token type 2 (blind RSA-2048,
 * RFC 9474 RSABSSA-SHA384-PSS-Deterministic) with java.math.BigInteger and java.security,
 * the ldpstream (collection, window) challenge, and a token wallet that talks to the issuer.
 */
public final class PrivacyPass {
  public static final int TOKEN_TYPE = 2;
  public static final int NK = 256;
  public static final int TOKEN_LEN = 2 + 32 + 32 + 32 + NK;
  private static final int HLEN = 48;
  private static final int SALT_LEN = 48;
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final byte[] SHA384_ID = hex("300b0609608648016503040202");
  private static final byte[] PSS_ALG = concat(hex("303d06092a864886f70d01010a3030a00d"),
      SHA384_ID, hex("a11a301806092a864886f70d010108"), SHA384_ID, hex("a203020130"));

  private PrivacyPass() {}

  /** An issuer public key: modulus, exponent, its SPKI and token_key_id. */
  public static final class RsaKey {
    public final BigInteger n;
    public final BigInteger e;
    public final byte[] spki;
    public final byte[] keyId;

    RsaKey(BigInteger n, BigInteger e, byte[] spki) {
      this.n = n;
      this.e = e;
      this.spki = spki;
      this.keyId = sha256(spki);
    }
  }

  /** What a client keeps between its TokenRequest and the TokenResponse. */
  public static final class State {
    public final byte[] tokenInput;
    final BigInteger inv;
    final RsaKey key;

    State(byte[] tokenInput, BigInteger inv, RsaKey key) {
      this.tokenInput = tokenInput;
      this.inv = inv;
      this.key = key;
    }
  }

  /** A TokenRequest and its state. */
  public static final class Request {
    public final byte[] request;
    public final State state;

    Request(byte[] request, State state) {
      this.request = request;
      this.state = state;
    }
  }

  static byte[] hex(String s) {
    byte[] out = new byte[s.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] p : parts) {
      out.write(p, 0, p.length);
    }
    return out.toByteArray();
  }

  private static byte[] digest(String alg, byte[] data) {
    try {
      return MessageDigest.getInstance(alg).digest(data);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(alg + " is not available", e);
    }
  }

  public static byte[] sha256(byte[] data) {
    return digest("SHA-256", data);
  }

  public static byte[] sha384(byte[] data) {
    return digest("SHA-384", data);
  }

  static byte[] i2osp(BigInteger x, int len) {
    byte[] b = x.toByteArray();
    if (b.length == len) {
      return b;
    }
    if (b.length == len + 1 && b[0] == 0) {
      return Arrays.copyOfRange(b, 1, b.length);
    }
    if (b.length > len) {
      throw new IllegalArgumentException("integer too large");
    }
    byte[] out = new byte[len];
    System.arraycopy(b, 0, out, len - b.length, b.length);
    return out;
  }

  static BigInteger os2ip(byte[] b) {
    return new BigInteger(1, b);
  }

  private static byte[] u16(int n) {
    return new byte[] {(byte) (n >> 8), (byte) n};
  }

  private static byte[] mgf1(byte[] seed, int len) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (int c = 0; out.size() < len; c++) {
      byte[] h = sha384(concat(seed, new byte[] {(byte) (c >>> 24), (byte) (c >>> 16),
          (byte) (c >>> 8), (byte) c}));
      out.write(h, 0, h.length);
    }
    return Arrays.copyOf(out.toByteArray(), len);
  }

  /** EMSA-PSS-ENCODE (RFC 8017 §9.1.1) with SHA-384 and MGF1-SHA-384. */
  public static byte[] emsaPssEncode(byte[] msg, int emBits, byte[] salt) {
    int emLen = (emBits + 7) / 8;
    byte[] h = sha384(concat(new byte[8], sha384(msg), salt));
    byte[] db = concat(new byte[emLen - salt.length - HLEN - 2], new byte[] {1}, salt);
    byte[] mask = mgf1(h, emLen - HLEN - 1);
    for (int i = 0; i < db.length; i++) {
      db[i] ^= mask[i];
    }
    db[0] &= (byte) (0xff >> (8 * emLen - emBits));
    return concat(db, h, new byte[] {(byte) 0xbc});
  }

  /** RSASSA-PSS-VERIFY (RFC 8017 §8.1.2), SHA-384, salt 48. */
  public static boolean pssVerify(RsaKey key, byte[] msg, byte[] sig) {
    if (sig.length != NK) {
      return false;
    }
    BigInteger s = os2ip(sig);
    if (s.compareTo(key.n) >= 0) {
      return false;
    }
    int emBits = key.n.bitLength() - 1;
    int emLen = (emBits + 7) / 8;
    byte[] em = i2osp(s.modPow(key.e, key.n), emLen);
    if ((em[emLen - 1] & 0xff) != 0xbc) {
      return false;
    }
    byte[] masked = Arrays.copyOfRange(em, 0, emLen - HLEN - 1);
    byte[] h = Arrays.copyOfRange(em, emLen - HLEN - 1, emLen - 1);
    int top = 0xff >> (8 * emLen - emBits);
    if ((masked[0] & ~top & 0xff) != 0) {
      return false;
    }
    byte[] mask = mgf1(h, masked.length);
    for (int i = 0; i < masked.length; i++) {
      masked[i] ^= mask[i];
    }
    masked[0] &= (byte) top;
    int ps = emLen - HLEN - SALT_LEN - 2;
    for (int i = 0; i < ps; i++) {
      if (masked[i] != 0) {
        return false;
      }
    }
    if (masked[ps] != 1) {
      return false;
    }
    byte[] salt = Arrays.copyOfRange(masked, masked.length - SALT_LEN, masked.length);
    return MessageDigest.isEqual(h, sha384(concat(new byte[8], sha384(msg), salt)));
  }

  private static int[] der(byte[] d, int at, int tag) {
    if ((d[at] & 0xff) != tag) {
      throw new IllegalArgumentException("bad DER in the issuer key");
    }
    int n = d[at + 1] & 0xff;
    at += 2;
    if ((n & 0x80) != 0) {
      int w = n & 0x7f;
      n = 0;
      for (int i = 0; i < w; i++) {
        n = (n << 8) | (d[at + i] & 0xff);
      }
      at += w;
    }
    if (at + n > d.length) {
      throw new IllegalArgumentException("bad DER in the issuer key");
    }
    return new int[] {at, at + n};  // content [start, end)
  }

  /** The RSA key of an RSASSA-PSS SubjectPublicKeyInfo (RFC 9578 §6.5). */
  public static RsaKey keyFromSpki(byte[] spki) {
    int[] body = der(spki, 0, 0x30);
    for (int i = 0; i < PSS_ALG.length; i++) {
      if (spki[body[0] + i] != PSS_ALG[i]) {
        throw new IllegalArgumentException("not an RSASSA-PSS (SHA-384, salt 48) key");
      }
    }
    int[] bits = der(spki, body[0] + PSS_ALG.length, 0x03);
    int[] seq = der(spki, bits[0] + 1, 0x30);
    int[] n = der(spki, seq[0], 0x02);
    int[] e = der(spki, n[1], 0x02);
    RsaKey key = new RsaKey(os2ip(Arrays.copyOfRange(spki, n[0], n[1])),
        os2ip(Arrays.copyOfRange(spki, e[0], e[1])), spki);
    if (key.n.bitLength() != 8 * NK) {
      throw new IllegalArgumentException("the issuer key must be RSA-2048");
    }
    return key;
  }

  /** SHA-256("ldpstream-token-v1" 0 collection 0 decimal(window)). */
  public static byte[] redemptionContext(String collection, long window) {
    return sha256(concat("ldpstream-token-v1".getBytes(StandardCharsets.US_ASCII),
        new byte[1], collection.getBytes(StandardCharsets.US_ASCII), new byte[1],
        Long.toString(window).getBytes(StandardCharsets.US_ASCII)));
  }

  /** The TokenChallenge of the reports of {@code collection} in the window {@code window}. */
  public static byte[] tokenChallenge(String issuerName, String collection, long window) {
    byte[] issuer = issuerName.getBytes(StandardCharsets.US_ASCII);
    byte[] origin = collection.getBytes(StandardCharsets.US_ASCII);
    return concat(u16(TOKEN_TYPE), u16(issuer.length), issuer, new byte[] {32},
        redemptionContext(collection, window), u16(origin.length), origin);
  }

  /** A TokenRequest (RFC 9578 §6.1); nonce, salt and r from SecureRandom unless given. */
  public static Request beginRequest(RsaKey key, byte[] challenge, byte[] nonce, byte[] salt,
      BigInteger r) {
    if (nonce == null) {
      nonce = new byte[32];
      RANDOM.nextBytes(nonce);
    }
    if (salt == null) {
      salt = new byte[SALT_LEN];
      RANDOM.nextBytes(salt);
    }
    byte[] tokenInput = concat(u16(TOKEN_TYPE), nonce, sha256(challenge), key.keyId);
    BigInteger m = os2ip(emsaPssEncode(tokenInput, key.n.bitLength() - 1, salt));
    if (!m.gcd(key.n).equals(BigInteger.ONE)) {
      throw new IllegalArgumentException("the encoded message is not invertible");
    }
    while (r == null || r.signum() <= 0 || r.compareTo(key.n) >= 0
        || !r.gcd(key.n).equals(BigInteger.ONE)) {
      r = new BigInteger(key.n.bitLength() + 64, RANDOM).mod(key.n);
    }
    BigInteger z = m.multiply(r.modPow(key.e, key.n)).mod(key.n);
    byte[] req = concat(u16(TOKEN_TYPE), new byte[] {key.keyId[31]}, i2osp(z, NK));
    return new Request(req, new State(tokenInput, r.modInverse(key.n), key));
  }

  /** The Token from a TokenResponse (RFC 9578 §6.3); throws if it does not verify. */
  public static byte[] finalizeToken(State state, byte[] response) {
    if (response.length != NK) {
      throw new IllegalArgumentException("a TokenResponse is " + NK + " bytes");
    }
    byte[] sig = i2osp(os2ip(response).multiply(state.inv).mod(state.key.n), NK);
    if (!pssVerify(state.key, state.tokenInput, sig)) {
      throw new IllegalArgumentException("the issuer's signature does not verify");
    }
    return concat(state.tokenInput, sig);
  }

  private static final char[] B64URL =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".toCharArray();

  /** Base64url without padding (RFC 4648 §5; java.util.Base64 is not on Android before 26). */
  public static String b64url(byte[] b) {
    StringBuilder out = new StringBuilder((b.length * 4 + 2) / 3);
    for (int i = 0; i < b.length; i += 3) {
      int n = (b[i] & 0xff) << 16 | (i + 1 < b.length ? (b[i + 1] & 0xff) << 8 : 0)
          | (i + 2 < b.length ? b[i + 2] & 0xff : 0);
      int chars = Math.min(4, (b.length - i) * 4 / 3 + ((b.length - i) % 3 == 0 ? 0 : 1));
      for (int j = 0; j < chars; j++) {
        out.append(B64URL[(n >>> (18 - 6 * j)) & 63]);
      }
    }
    return out.toString();
  }

  /** Base64url decoding, padding optional. */
  static byte[] b64urlDecode(String s) {
    String t = s.replace("=", "");
    byte[] out = new byte[t.length() * 3 / 4];
    int acc = 0;
    int bits = 0;
    int o = 0;
    for (int i = 0; i < t.length(); i++) {
      char c = t.charAt(i);
      int v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
          : c >= '0' && c <= '9' ? c - '0' + 52 : c == '-' ? 62 : c == '_' ? 63 : -1;
      if (v < 0) {
        throw new IllegalArgumentException("not base64url: " + s);
      }
      acc = acc << 6 | v;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out[o++] = (byte) (acc >>> bits);
      }
    }
    return out;
  }

  /** What the device shows the issuer (X-LDP-Device): one-way, the secret stays here. */
  public static String deviceCredential(byte[] secret) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret, "HmacSHA256"));
      return b64url(mac.doFinal("ldpstream issuer credential v1"
          .getBytes(StandardCharsets.US_ASCII)));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** {@code PrivateToken token="…"} (RFC 9577 §2.2). */
  public static String authorizationHeader(byte[] token) {
    return "PrivateToken token=\"" + b64url(token) + "\"";
  }

  /** An application/x-ldp-token-frames body of (tokens, message) pairs. */
  public static byte[] tokenFrames(List<List<byte[]>> tokens, List<byte[]> messages) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (int i = 0; i < messages.size(); i++) {
      List<byte[]> t = tokens.get(i);
      out.write(t.size() & 255);
      out.write((t.size() >> 8) & 255);
      for (byte[] x : t) {
        out.write(x, 0, x.length);
      }
      byte[] m = messages.get(i);
      out.write(m.length & 255);
      out.write((m.length >> 8) & 255);
      out.write((m.length >> 16) & 255);
      out.write(m.length >>> 24);
      out.write(m, 0, m.length);
    }
    return out.toByteArray();
  }

  /** Collection id and report count of a binary message (docs/wire-format.md). */
  public static Object[] messageHead(byte[] msg) {
    int idLen = msg[5] & 0xff;
    String cid = new String(msg, 6, idLen, StandardCharsets.US_ASCII);
    int at = 6 + idLen + 16 + 4 + 1;
    at += 1 + (msg[at] & 0xff) + 16;
    long n = (msg[at] & 0xffL) | (msg[at + 1] & 0xffL) << 8 | (msg[at + 2] & 0xffL) << 16
        | (msg[at + 3] & 0xffL) << 24;
    return new Object[] {cid, n};
  }

  /** The issuer refused: HTTP status and reason (e.g. "quota"). */
  public static final class IssuanceException extends IOException {
    public final int status;
    public final String reason;

    IssuanceException(int status, String reason, String detail) {
      super(status + " " + reason + ": " + detail);
      this.status = status;
      this.reason = reason;
    }
  }

  /**
   * A device's tokens per (collection, window), obtained from the issuer when needed, spent
   * one per report.  The key comes from the issuer directory and must name the collection and
   * window; the challenge is computed here (the issuer cannot tag it).
   */
  public static final class Wallet {
    private final Issuer issuer;
    private String issuerName = "ldpstream";
    private final Map<String, long[]> windows = new HashMap<>();  // id -> {window, seconds}
    private final Map<String, RsaKey> keys = new HashMap<>();
    private final Map<String, List<byte[]>> tokens = new HashMap<>();

    public Wallet(String issuerUrl, byte[] deviceSecret, String fleetKey) {
      issuer = new Issuer(issuerUrl, deviceSecret, fleetKey);
    }

    private String find(String collection, long nowS, Long window) {
      for (Map.Entry<String, long[]> e : windows.entrySet()) {
        long[] w = e.getValue();
        if (e.getKey().startsWith(collection + "\u0000") && (window != null ? w[0] == window
            : w[0] <= nowS && nowS < w[0] + w[1])) {
          return e.getKey();
        }
      }
      return null;
    }

    /** (window start, window seconds) of the key of {@code collection} at {@code nowS}. */
    public long[] window(String collection, long nowS, Long window) throws IOException {
      String id = find(collection, nowS, window);
      if (id == null) {
        Map<?, ?> doc = issuer.directory(collection);
        Object name = doc.get("ldp-issuer-name");
        issuerName = name instanceof String ? (String) name : "ldpstream";
        for (Object o : (List<?>) doc.get("token-keys")) {
          Map<?, ?> k = (Map<?, ?>) o;
          if (!Long.valueOf(TOKEN_TYPE).equals(k.get("token-type"))
              || !collection.equals(k.get("ldp-collection"))) {
            continue;
          }
          long w = (Long) k.get("ldp-window");
          String kid = collection + "\u0000" + w;
          windows.put(kid, new long[] {w, (Long) k.get("ldp-window-seconds")});
          keys.put(kid, keyFromSpki(b64urlDecode((String) k.get("token-key"))));
        }
        id = find(collection, nowS, window);
        if (id == null) {
          throw new IssuanceException(404, "no_key", "no key of " + collection);
        }
      }
      return windows.get(id);
    }

    /** {@code n} tokens of {@code collection} for its window at {@code nowS}. */
    public List<byte[]> take(String collection, int n, long nowS, Long window)
        throws IOException {
      long[] w = window(collection, nowS, window);
      String id = collection + "\u0000" + w[0];
      List<byte[]> have = tokens.get(id);
      if (have == null) {
        have = new ArrayList<>();
        tokens.put(id, have);
      }
      if (have.size() < n) {
        int count = n - have.size();
        RsaKey key = keys.get(id);
        byte[] ch = tokenChallenge(issuerName, collection, w[0]);
        List<Request> pending = new ArrayList<>();
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        for (int i = 0; i < count; i++) {
          Request r = beginRequest(key, ch, null, null, null);
          pending.add(r);
          body.write(r.request, 0, r.request.length);
        }
        byte[] resp = issuer.sign(collection, w[0], body.toByteArray());
        if (resp.length != NK * count) {
          throw new IOException("short TokenResponse");
        }
        for (int i = 0; i < count; i++) {
          have.add(finalizeToken(pending.get(i).state,
              Arrays.copyOfRange(resp, i * NK, (i + 1) * NK)));
        }
      }
      List<byte[]> out = new ArrayList<>(have.subList(0, n));
      have.subList(0, n).clear();
      return out;
    }
  }

  /** The issuer's two HTTP calls, as this device (its credential) and fleet (its key). */
  private static final class Issuer {
    private final String url;
    private final String credential;
    private final String fleetKey;

    Issuer(String issuerUrl, byte[] deviceSecret, String fleetKey) {
      url = issuerUrl.replaceAll("/+$", "");
      credential = deviceCredential(deviceSecret);
      this.fleetKey = fleetKey;
    }

    /** The issuer directory, asked for the keys of {@code collection}. */
    Map<?, ?> directory(String collection) throws IOException {
      HttpURLConnection c = (HttpURLConnection) new URL(url
          + "/.well-known/private-token-issuer-directory?collection="
          + URLEncoder.encode(collection, "UTF-8")).openConnection();
      return (Map<?, ?>) Json.parse(new String(read(c), StandardCharsets.UTF_8));
    }

    /** The TokenResponses to the concatenated TokenRequests {@code body} of a window. */
    byte[] sign(String collection, long window, byte[] body) throws IOException {
      HttpURLConnection c = (HttpURLConnection) new URL(url + "/token-request?collection="
          + URLEncoder.encode(collection, "UTF-8") + "&window=" + window).openConnection();
      c.setRequestMethod("POST");
      c.setDoOutput(true);
      c.setRequestProperty("Content-Type", "application/private-token-request");
      c.setRequestProperty("Accept", "application/private-token-response");
      c.setRequestProperty("X-LDP-Device", credential);
      if (fleetKey != null) {
        c.setRequestProperty("Authorization", "Bearer " + fleetKey);
      }
      try (OutputStream out = c.getOutputStream()) {
        out.write(body);
      }
      return read(c);
    }

    private static byte[] read(HttpURLConnection c) throws IOException {
      int status = c.getResponseCode();
      InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream();
      byte[] data = in == null ? new byte[0] : Io.readAll(in);
      if (in != null) {
        in.close();
      }
      if (status >= 400) {
        String reason = "error";
        String detail = "";
        try {
          Map<?, ?> m = (Map<?, ?>) Json.parse(new String(data, StandardCharsets.UTF_8));
          reason = String.valueOf(m.get("reason"));
          detail = String.valueOf(m.get("detail"));
        } catch (RuntimeException e) {
          detail = new String(data, StandardCharsets.UTF_8);
        }
        throw new IssuanceException(status, reason, detail);
      }
      return data;
    }
  }
}
