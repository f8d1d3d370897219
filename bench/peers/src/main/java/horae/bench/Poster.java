package horae.bench;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The peers' task handler's delivery: an HMAC-signed POST (the Standard Webhooks scheme Horae's
 * dispatcher signs with: {@code v1,base64(HMAC-SHA256(key, id.timestamp.body))}) of the task's key
 * to the bench's receiver, through one pooled, keep-alive {@link HttpClient} (HTTP/1.1) shared by
 * every worker thread. {@link #post} returns only after a 2xx and throws otherwise, so the task
 * completes only after the receiver has the call.
 */
final class Poster {
  private final HttpClient client =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(10))
          .build();
  private final URI hook;
  private final URI warm;
  private final String system;
  private final SecretKeySpec key;
  private final ThreadLocal<Mac> macs;

  Poster(String system, String url, String secretB64) {
    this.system = system;
    this.hook = URI.create(url);
    this.warm = URI.create(url.replaceAll("/hook$", "/warm"));
    this.key = new SecretKeySpec(Base64.getDecoder().decode(secretB64), "HmacSHA256");
    this.macs =
        ThreadLocal.withInitial(
            () -> {
              try {
                Mac mac = Mac.getInstance("HmacSHA256");
                mac.init(key);
                return mac;
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
  }

  /** POST task {@code id} (due at {@code dueMs}); {@code warmUp}: to the receiver's /warm. */
  void post(String id, long dueMs, boolean warmUp) throws Exception {
    String body = "{\"key\":\"" + id + "\",\"due_ms\":" + dueMs + "}";
    String msgId = system + ":" + id;
    long ts = System.currentTimeMillis() / 1000;
    Mac mac = macs.get();
    byte[] sig =
        mac.doFinal((msgId + "." + ts + "." + body).getBytes(StandardCharsets.UTF_8));
    HttpRequest request =
        HttpRequest.newBuilder(warmUp ? warm : hook)
            .timeout(Duration.ofSeconds(30))
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", msgId)
            .header("webhook-id", msgId)
            .header("webhook-timestamp", Long.toString(ts))
            .header("webhook-signature", "v1," + Base64.getEncoder().encodeToString(sig))
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build();
    HttpResponse<Void> response = client.send(request, HttpResponse.BodyHandlers.discarding());
    if (response.statusCode() / 100 != 2) {
      throw new IllegalStateException("receiver answered " + response.statusCode());
    }
  }
}
