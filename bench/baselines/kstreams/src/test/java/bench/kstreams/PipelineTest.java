package bench.kstreams;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** The baseline's topology on TopologyTestDriver, with the repository's schemas (no broker, no registry). */
class PipelineTest {
  private static final Path SCHEMAS = Path.of("../../../schemas");
  private static final int ENVELOPE_ID = 7;
  private static final int CONVERSION_ID = 9;
  private static Schema envelope;
  private static Schema conversion;

  private TopologyTestDriver driver;
  private TestInputTopic<String, byte[]> input;
  private TestOutputTopic<String, byte[]> output;

  @BeforeEach
  void start() throws Exception {
    envelope = new Schema.Parser().parse(Files.readString(SCHEMAS.resolve("event-envelope.avsc")));
    conversion = new Schema.Parser().parse(Files.readString(SCHEMAS.resolve("conversion-ready.avsc")));
    WireDecoder decoder =
        new WireDecoder(
            id -> {
              if (id != ENVELOPE_ID) throw new IllegalStateException("no schema " + id);
              return envelope;
            },
            envelope);
    Pipeline.ConversionEncoder encoder = new Pipeline.ConversionEncoder(conversion, CONVERSION_ID, "PIXEL1", "CompletePayment");
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, "test");
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
    props.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("kstreams-test").toString());
    driver = new TopologyTestDriver(Pipeline.topology("in", "people", "out", decoder, encoder), props);
    input = driver.createInputTopic("in", new StringSerializer(), new ByteArraySerializer());
    output = driver.createOutputTopic("out", new StringDeserializer(), new ByteArrayDeserializer());
    TestInputTopic<String, String> people = driver.createInputTopic("people", new StringSerializer(), new StringSerializer());
    people.pipeInput("cust_1", "person-1");
    people.pipeInput("e".repeat(64), "person-2");
  }

  @AfterEach
  void stop() {
    driver.close();
  }

  /** An envelope as the gateway writes it, in wire format. */
  static byte[] wire(String workspace, String key, List<String[]> identifiers) throws Exception {
    GenericRecord e = new GenericData.Record(envelope);
    Schema dedupe = envelope.getField("dedupe").schema().getTypes().get(1);
    Schema consent = envelope.getField("consent").schema();
    Schema consentValue = consent.getField("analytics_storage").schema();
    Schema identifier = envelope.getField("identifiers").schema().getElementType();
    Schema session = envelope.getField("session").schema().getTypes().get(1);
    e.put("v", 1);
    e.put("workspace_id", workspace);
    e.put("key_mode", new GenericData.EnumSymbol(envelope.getField("key_mode").schema(), "live"));
    e.put("api_key_id", "key-1");
    e.put("request_id", "req-1");
    e.put("index", 0);
    e.put("received_at", 1_764_000_000_000L);
    e.put("endpoint", new GenericData.EnumSymbol(envelope.getField("endpoint").schema(), "events"));
    e.put("idempotency_key", key);
    GenericRecord d = new GenericData.Record(dedupe);
    d.put("key", key);
    d.put("scope", new GenericData.EnumSymbol(dedupe.getField("scope").schema(), "event"));
    e.put("dedupe", d);
    e.put("source", new GenericData.EnumSymbol(envelope.getField("source").schema().getTypes().get(1), "WEB"));
    e.put("name", "purchase");
    GenericRecord c = new GenericData.Record(consent);
    for (Schema.Field f : consent.getFields()) c.put(f.name(), new GenericData.EnumSymbol(consentValue, "GRANTED"));
    e.put("consent", c);
    List<GenericRecord> ids = new ArrayList<>();
    for (String[] kv : identifiers) {
      GenericRecord id = new GenericData.Record(identifier);
      id.put("kind", new GenericData.EnumSymbol(identifier.getField("kind").schema(), kv[0]));
      id.put("value", kv[1]);
      ids.add(id);
    }
    e.put("identifiers", ids);
    GenericRecord s = new GenericData.Record(session);
    s.put("page_location", "https://shop.example/checkout?utm_source=tiktok&ttclid=E.C.P.abc");
    s.put("user_agent", "Mozilla/5.0");
    e.put("session", s);
    e.put("payload_json", "{\"value\":89.9,\"currency\":\"EUR\",\"transaction_id\":\"T-1\",\"items\":[{\"item_id\":\"SKU-1\",\"price\":89.9,\"quantity\":1}]}");
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(0);
    out.write(ByteBuffer.allocate(4).putInt(ENVELOPE_ID).array());
    BinaryEncoder enc = EncoderFactory.get().binaryEncoder(out, null);
    new GenericDatumWriter<GenericRecord>(envelope).write(e, enc);
    enc.flush();
    return out.toByteArray();
  }

  static GenericRecord decode(byte[] bytes) throws Exception {
    assertEquals(0, bytes[0]);
    assertEquals(CONVERSION_ID, ByteBuffer.wrap(bytes, 1, 4).getInt());
    return new GenericDatumReader<GenericRecord>(conversion).read(null, DecoderFactory.get().binaryDecoder(bytes, 5, bytes.length - 5, null));
  }

  static String sha256(String s) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
  }

  static Stream<Arguments> joins() {
    return Stream.of(
        Arguments.of("user id in the table", List.<String[]>of(new String[] {"user_id", "cust_1"}), "person-1"),
        Arguments.of("email in the table (no user id)", List.<String[]>of(new String[] {"email_sha256", "e".repeat(64)}), "person-2"),
        Arguments.of("user id wins over email", List.<String[]>of(new String[] {"email_sha256", "e".repeat(64)}, new String[] {"user_id", "cust_1"}), "person-1"),
        Arguments.of("identifier not in the table", List.<String[]>of(new String[] {"user_id", "cust_9"}), null),
        Arguments.of("no identifier at all", List.<String[]>of(), null));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("joins")
  void oneConversionPerEventJoinedToItsPerson(String name, List<String[]> ids, String person) throws Exception {
    input.pipeInput("ws1:k1", wire("ws1", "k1", ids));
    List<KeyValue<String, byte[]>> out = output.readKeyValuesToList();
    assertEquals(1, out.size());
    assertEquals("ws1:k1", out.get(0).key);
    GenericRecord c = decode(out.get(0).value);
    GenericRecord rec = (GenericRecord) c.get("record");
    assertEquals("k1", c.get("event_id").toString());
    assertEquals("PIXEL1", c.get("event_source_id").toString());
    assertEquals("CompletePayment", rec.get("event").toString());
    assertEquals(1_764_000_000L, rec.get("event_time"));
    assertEquals("T-1", rec.get("transaction_id").toString());
    assertEquals("{\"value\":89.9,\"currency\":\"EUR\",\"contents\":[{\"content_id\":\"SKU-1\",\"price\":89.9,\"quantity\":1}]}", rec.get("properties_json").toString());
    GenericRecord user = (GenericRecord) rec.get("user");
    assertEquals("E.C.P.abc", user.get("ttclid").toString());
    List<String> external = new ArrayList<>();
    if (user.get("external_id") != null) for (Object o : (List<?>) user.get("external_id")) external.add(o.toString());
    List<String> expected = new ArrayList<>();
    for (String[] kv : ids) if (kv[0].equals("user_id")) expected.add(sha256(kv[1]));
    if (person != null) expected.add(person);
    assertEquals(expected, external);
  }

  @Test
  void aRepeatedKeyIsDroppedPerWorkspace() throws Exception {
    List<String[]> ids = List.<String[]>of(new String[] {"user_id", "cust_1"});
    input.pipeInput("ws1:k1", wire("ws1", "k1", ids));
    input.pipeInput("ws1:k1", wire("ws1", "k1", ids));
    input.pipeInput("ws2:k1", wire("ws2", "k1", ids));
    input.pipeInput("ws1:k2", wire("ws1", "k2", ids));
    List<String> keys = output.readKeyValuesToList().stream().map(kv -> kv.key).toList();
    assertEquals(List.of("ws1:k1", "ws2:k1", "ws1:k2"), keys);
    assertTrue(driver.getKeyValueStore(Pipeline.DEDUPE_STORE).get("ws1:k1") != null);
  }

  static Stream<Arguments> badInput() {
    return Stream.of(
        Arguments.of("shorter than the header", new byte[] {0, 0, 0}),
        Arguments.of("wrong magic byte", new byte[] {1, 0, 0, 0, 7, 2, 2}),
        Arguments.of("a schema id the registry does not know", new byte[] {0, 0, 0, 0, 8, 2}),
        Arguments.of("truncated Avro", new byte[] {0, 0, 0, 0, 7, 2}));
  }

  /** The input is the gateway's: a record it cannot read is a bug of the run, so the app stops instead of skipping. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("badInput")
  void badInputStopsTheApp(String name, byte[] bytes) {
    assertThrows(RuntimeException.class, () -> input.pipeInput("ws1:bad", bytes));
    assertNull(driver.getKeyValueStore(Pipeline.DEDUPE_STORE).get("ws1:bad"));
    assertTrue(output.isEmpty());
  }
}
