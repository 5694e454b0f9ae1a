package org.ldpstream.sdk;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Privacy Pass against the shared vectors (sdks/vectors/privacypass). */
class PrivacyPassTest {
  private static byte[] hex(Object s) {
    return PrivacyPass.hex((String) s);
  }

  @Test
  void vectorsPassByteForByte() throws Exception {
    String text = new String(Files.readAllBytes(VectorsTest.vectors().resolve(
        "privacypass/tokens.json")), StandardCharsets.UTF_8);
    List<?> cases = (List<?>) ((Map<?, ?>) Json.parse(text)).get("cases");
    assertTrue(cases.size() >= 2);
    for (Object o : cases) {
      Map<?, ?> c = (Map<?, ?>) o;
      PrivacyPass.RsaKey key = PrivacyPass.keyFromSpki(
          Base64.getUrlDecoder().decode((String) c.get("token_key")));
      assertEquals(c.get("n"), key.n.toString(16));
      byte[] ch = PrivacyPass.tokenChallenge((String) c.get("issuer_name"),
          (String) c.get("collection"), (Long) c.get("window"));
      assertArrayEquals(hex(c.get("token_challenge")), ch);
      PrivacyPass.Request r = PrivacyPass.beginRequest(key, ch, hex(c.get("nonce")),
          hex(c.get("salt")), new BigInteger((String) c.get("blind"), 16));
      assertArrayEquals(hex(c.get("token_request")), r.request);
      byte[] token = PrivacyPass.finalizeToken(r.state, hex(c.get("token_response")));
      assertArrayEquals(hex(c.get("token")), token);
      assertEquals(c.get("device_credential"),
          PrivacyPass.deviceCredential(hex(c.get("device_secret"))));
      assertEquals(c.get("authorization"), PrivacyPass.authorizationHeader(token));
      byte[] msg = hex(c.get("message"));
      assertArrayEquals(hex(c.get("token_frames")), PrivacyPass.tokenFrames(
          Collections.singletonList(Collections.singletonList(token)),
          Collections.singletonList(msg)));
      assertEquals(c.get("collection"), PrivacyPass.messageHead(msg)[0]);
      assertTrue(PrivacyPass.pssVerify(key, Arrays.copyOf(token, 98),
          Arrays.copyOfRange(token, 98, token.length)));
      byte[] bad = token.clone();
      bad[bad.length - 1] ^= 1;
      assertFalse(PrivacyPass.pssVerify(key, Arrays.copyOf(bad, 98),
          Arrays.copyOfRange(bad, 98, bad.length)));
      byte[] resp = hex(c.get("token_response"));
      resp[0] ^= 1;
      assertThrows(IllegalArgumentException.class, () -> PrivacyPass.finalizeToken(r.state, resp));
    }
  }
}
