package bench.kstreams;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams application: events.raw-shaped records (Confluent wire format Avro) → dedupe by the event's
 * dedupe key in a persistent RocksDB store with its changelog → left join against the identity table (a
 * GlobalKTable keyed by a person's identifier) → the conversions.ready record, exactly_once_v2, one stream thread.
 *
 * <p>Env: BOOTSTRAP, APP_ID, STATE_DIR, INPUT_TOPIC, IDENTITY_TOPIC, OUTPUT_TOPIC, SCHEMA_REGISTRY_URL, SCHEMAS_DIR,
 * EVENT_SOURCE_ID (the forwarding setup's pixel id), PLATFORM_EVENT (CompletePayment).
 */
final class Pipeline {
  private Pipeline() {}

  static final String DEDUPE_STORE = "dedupe";
  /** The order in which an event's identifiers are tried as the identity table's key. */
  private static final List<String> LOOKUP_KINDS = List.of("user_id", "email_sha256", "phone_e164_sha256", "client_id");
  /** Never a table key: events without any identifier of LOOKUP_KINDS join to nothing. */
  private static final String NO_KEY = "-";

  static void run() throws Exception {
    String input = Main.env("INPUT_TOPIC");
    String output = Main.env("OUTPUT_TOPIC");
    Registry registry = new Registry(Main.env("SCHEMA_REGISTRY_URL"));
    Path schemas = Path.of(Main.env("SCHEMAS_DIR"));
    Schema envelopeSchema = new Schema.Parser().parse(Files.readString(schemas.resolve("event-envelope.avsc")));
    Schema conversionSchema = new Schema.Parser().parse(Files.readString(schemas.resolve("conversion-ready.avsc")));
    WireDecoder decoder = new WireDecoder(registry::byId, envelopeSchema);
    ConversionEncoder encoder =
        new ConversionEncoder(
            conversionSchema,
            registry.register(output + "-value", conversionSchema),
            Main.env("EVENT_SOURCE_ID"),
            System.getenv().getOrDefault("PLATFORM_EVENT", "CompletePayment"));

    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, Main.env("APP_ID"));
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, Main.env("BOOTSTRAP"));
    props.put(StreamsConfig.STATE_DIR_CONFIG, Main.env("STATE_DIR"));
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    // One broker: internal topics (the dedupe store's changelog) cannot have more replicas.
    props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);

    KafkaStreams streams = new KafkaStreams(topology(input, Main.env("IDENTITY_TOPIC"), output, decoder, encoder), props);
    CountDownLatch stopped = new CountDownLatch(1);
    // The bench waits for RUNNING on stdout before it starts its clock's consumer side.
    streams.setStateListener((now, before) -> System.out.println("{\"state\":\"" + now + "\"}"));
    streams.setUncaughtExceptionHandler(
        e -> {
          e.printStackTrace();
          return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
              .SHUTDOWN_CLIENT;
        });
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  streams.close();
                  // How many conversions found their person in the identity table: the bench checks the join ran.
                  System.out.println("{\"joined\":" + encoder.joined + ",\"unjoined\":" + encoder.unjoined + "}");
                  stopped.countDown();
                }));
    streams.start();
    stopped.await();
  }

  /** input (wire-format envelopes) → dedupe → left join with the identity table → output (wire-format conversions). */
  static Topology topology(String input, String identityTopic, String output, WireDecoder decoder, ConversionEncoder encoder) {
    StreamsBuilder builder = new StreamsBuilder();
    builder.addStateStore(
        Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(DEDUPE_STORE), Serdes.String(), Serdes.Long()));
    GlobalKTable<String, String> people =
        builder.globalTable(
            identityTopic,
            Consumed.with(Serdes.String(), Serdes.String()),
            Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("identities"));
    KStream<String, GenericRecord> fresh =
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.ByteArray()))
            .processValues(() -> new Dedupe(decoder), DEDUPE_STORE);
    fresh
        .leftJoin(people, (key, envelope) -> lookupKey(envelope), encoder::encode)
        .to(output, Produced.with(Serdes.String(), Serdes.ByteArray()));
    return builder.build();
  }

  static String lookupKey(GenericRecord envelope) {
    @SuppressWarnings("unchecked")
    List<GenericRecord> ids = (List<GenericRecord>) envelope.get("identifiers");
    for (String kind : LOOKUP_KINDS) {
      for (GenericRecord id : ids) {
        if (kind.equals(id.get("kind").toString())) return id.get("value").toString();
      }
    }
    return NO_KEY;
  }

  /** Passes an event on the first time its workspace's dedupe key is seen; the store remembers when. */
  static final class Dedupe implements FixedKeyProcessor<String, byte[], GenericRecord> {
    private final WireDecoder decoder;
    private KeyValueStore<String, Long> seen;
    private FixedKeyProcessorContext<String, GenericRecord> context;

    Dedupe(WireDecoder decoder) {
      this.decoder = decoder;
    }

    @Override
    public void init(FixedKeyProcessorContext<String, GenericRecord> context) {
      this.context = context;
      this.seen = context.getStateStore(DEDUPE_STORE);
    }

    @Override
    public void process(FixedKeyRecord<String, byte[]> record) {
      GenericRecord envelope = decoder.decode(record.value());
      String key = envelope.get("workspace_id") + ":" + dedupeKey(envelope);
      if (seen.get(key) != null) return;
      seen.put(key, record.timestamp());
      context.forward(record.withValue(envelope));
    }

    private static String dedupeKey(GenericRecord envelope) {
      GenericRecord dedupe = (GenericRecord) envelope.get("dedupe");
      if (dedupe != null) return dedupe.get("key").toString();
      return envelope.get("request_id") + ":" + envelope.get("index");
    }
  }

  /** The conversions.ready record of an envelope (and its person, when the identity table knows one), wire format. */
  static final class ConversionEncoder {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final Schema schema;
    private final Schema recordSchema;
    private final Schema pageSchema;
    private final Schema userSchema;
    private final Schema consentSchema;
    private final Schema consentValue;
    private final Schema keyMode;
    private final int schemaId;
    private final String eventSourceId;
    private final String platformEvent;
    private final GenericDatumWriter<GenericRecord> writer;
    private final MessageDigest sha;
    private BinaryEncoder reuse;
    /** Written by the one stream thread, read after it stopped. */
    volatile long joined;
    volatile long unjoined;

    ConversionEncoder(Schema schema, int schemaId, String eventSourceId, String platformEvent) {
      this.schema = schema;
      this.recordSchema = schema.getField("record").schema();
      this.pageSchema = recordSchema.getField("page").schema();
      this.userSchema = recordSchema.getField("user").schema().getTypes().get(1);
      this.consentSchema = recordSchema.getField("consent").schema();
      this.consentValue = consentSchema.getField("ad_user_data").schema();
      this.keyMode = schema.getField("key_mode").schema();
      this.schemaId = schemaId;
      this.eventSourceId = eventSourceId;
      this.platformEvent = platformEvent;
      this.writer = new GenericDatumWriter<>(schema);
      try {
        this.sha = MessageDigest.getInstance("SHA-256");
      } catch (java.security.NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
    }

    byte[] encode(GenericRecord env, String person) {
      try {
        GenericRecord session = (GenericRecord) env.get("session");
        long received = (Long) env.get("received_at");
        Long eventTime = (Long) env.get("event_time");
        long at = eventTime != null ? eventTime : received;
        String eventId = String.valueOf(env.get("idempotency_key"));
        JsonNode payload = JSON.readTree(env.get("payload_json").toString());

        List<String> email = new ArrayList<>();
        List<String> phone = new ArrayList<>();
        List<String> external = new ArrayList<>();
        @SuppressWarnings("unchecked")
        List<GenericRecord> ids = (List<GenericRecord>) env.get("identifiers");
        for (GenericRecord id : ids) {
          String kind = id.get("kind").toString();
          String value = id.get("value").toString();
          switch (kind) {
            case "email_sha256", "email_canonical_sha256" -> email.add(value);
            case "phone_e164_sha256" -> phone.add(value);
            case "user_id" -> external.add(sha256(value));
            default -> {}
          }
        }
        if (person != null) {
          external.add(person);
          joined++;
        } else {
          unjoined++;
        }
        String url = session != null && session.get("page_location") != null ? session.get("page_location").toString() : "";
        GenericRecord user = new GenericData.Record(userSchema);
        user.put("email", email.isEmpty() ? null : email);
        user.put("phone", phone.isEmpty() ? null : phone);
        user.put("external_id", external.isEmpty() ? null : external);
        user.put("ttclid", queryParam(url, "ttclid"));
        user.put("user_agent", session != null && session.get("user_agent") != null ? session.get("user_agent").toString() : null);

        GenericRecord page = new GenericData.Record(pageSchema);
        page.put("url", url);
        GenericRecord envConsent = (GenericRecord) env.get("consent");
        GenericRecord consent = new GenericData.Record(consentSchema);
        consent.put("ad_user_data", new GenericData.EnumSymbol(consentValue, envConsent.get("ad_user_data").toString()));
        consent.put("ad_personalization", new GenericData.EnumSymbol(consentValue, envConsent.get("ad_personalization").toString()));

        ObjectNode properties = JSON.createObjectNode();
        if (payload.has("value")) properties.set("value", payload.get("value"));
        if (payload.has("currency")) properties.set("currency", payload.get("currency"));
        if (payload.has("items")) {
          ArrayNode contents = properties.putArray("contents");
          for (JsonNode item : payload.get("items")) {
            ObjectNode c = contents.addObject();
            c.set("content_id", item.get("item_id"));
            if (item.has("price")) c.set("price", item.get("price"));
            if (item.has("quantity")) c.set("quantity", item.get("quantity"));
          }
        }

        GenericRecord rec = new GenericData.Record(recordSchema);
        rec.put("event", platformEvent);
        rec.put("event_id", eventId);
        rec.put("event_time", at / 1000);
        rec.put("limited_data_use", false);
        rec.put("page", page);
        rec.put("user", user);
        rec.put("conversion_date_time", Instant.ofEpochMilli(at).toString());
        rec.put("transaction_id", payload.hasNonNull("transaction_id") ? payload.get("transaction_id").asText() : null);
        rec.put("consent", consent);
        rec.put("properties_json", JSON.writeValueAsString(properties));

        GenericRecord out = new GenericData.Record(schema);
        out.put("v", 1);
        out.put("workspace_id", env.get("workspace_id").toString());
        out.put("key_mode", new GenericData.EnumSymbol(keyMode, env.get("key_mode").toString()));
        out.put("event_id", eventId);
        out.put("received_at", received);
        out.put("request_id", env.get("request_id").toString());
        out.put("event_source", env.get("source") != null ? env.get("source").toString() : "WEB");
        out.put("event_source_id", eventSourceId);
        out.put("test_event_code", null);
        out.put("record", rec);

        ByteArrayOutputStream bytes = new ByteArrayOutputStream(1024);
        bytes.write(0);
        bytes.write(schemaId >>> 24);
        bytes.write(schemaId >>> 16);
        bytes.write(schemaId >>> 8);
        bytes.write(schemaId);
        reuse = EncoderFactory.get().binaryEncoder(bytes, reuse);
        writer.write(out, reuse);
        reuse.flush();
        return bytes.toByteArray();
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }

    /** Platforms take user ids as SHA-256 hex in external_id, as enrich sends them. */
    private String sha256(String value) {
      return HexFormat.of().formatHex(sha.digest(value.getBytes(StandardCharsets.UTF_8)));
    }

    private static String queryParam(String url, String name) {
      int q = url.indexOf('?');
      if (q < 0) return null;
      for (String part : url.substring(q + 1).split("&")) {
        if (part.startsWith(name + "=")) return part.substring(name.length() + 1);
      }
      return null;
    }
  }
}
