package bench.kstreams;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Map;
import org.apache.avro.Schema;

/** The two calls of the Confluent schema registry API the baseline needs: a schema by id, and registering one. */
final class Registry {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String CONTENT_TYPE = "application/vnd.schemaregistry.v1+json";
  private final String base;
  private final HttpClient http = HttpClient.newHttpClient();

  Registry(String base) {
    this.base = base.endsWith("/") ? base.substring(0, base.length() - 1) : base;
  }

  Schema byId(int id) {
    String body = call(HttpRequest.newBuilder(URI.create(base + "/schemas/ids/" + id)).GET());
    try {
      return new Schema.Parser().parse(JSON.readTree(body).get("schema").asText());
    } catch (IOException e) {
      throw new IllegalStateException("schema " + id + ": " + body, e);
    }
  }

  int register(String subject, Schema schema) {
    try {
      String request = JSON.writeValueAsString(Map.of("schema", schema.toString()));
      String body =
          call(
              HttpRequest.newBuilder(URI.create(base + "/subjects/" + subject + "/versions"))
                  .header("content-type", CONTENT_TYPE)
                  .POST(HttpRequest.BodyPublishers.ofString(request)));
      return JSON.readTree(body).get("id").asInt();
    } catch (IOException e) {
      throw new IllegalStateException("register " + subject, e);
    }
  }

  private String call(HttpRequest.Builder request) {
    try {
      HttpResponse<String> r = http.send(request.header("accept", CONTENT_TYPE).build(), HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() >= 300) throw new IllegalStateException(r.uri() + " answered " + r.statusCode() + ": " + r.body());
      return r.body();
    } catch (IOException e) {
      throw new IllegalStateException("schema registry at " + base, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
