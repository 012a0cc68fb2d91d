package bench.kstreams;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.function.IntFunction;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;

/**
 * Confluent wire format (magic byte 0, 4-byte schema id, Avro binary) into a GenericRecord of the reader schema
 * (schemas/event-envelope.avsc). The writer schema comes from the registry by id, once per id, so envelopes written
 * with a later compatible schema are resolved as any consumer of the registry would.
 */
final class WireDecoder {
  private final IntFunction<Schema> writerSchemas;
  private final Schema reader;
  private final Map<Integer, GenericDatumReader<GenericRecord>> readers = new HashMap<>();
  private BinaryDecoder reuse;

  /** writerSchemas: a schema id → its schema (the registry's, Registry::byId); called once per id. */
  WireDecoder(IntFunction<Schema> writerSchemas, Schema reader) {
    this.writerSchemas = writerSchemas;
    this.reader = reader;
  }

  GenericRecord decode(byte[] bytes) {
    if (bytes.length < 5 || bytes[0] != 0) throw new IllegalArgumentException("not Confluent wire format");
    int id = ByteBuffer.wrap(bytes, 1, 4).getInt();
    GenericDatumReader<GenericRecord> datum = readers.computeIfAbsent(id, i -> new GenericDatumReader<>(writerSchemas.apply(i), reader));
    reuse = DecoderFactory.get().binaryDecoder(bytes, 5, bytes.length - 5, reuse);
    try {
      return datum.read(null, reuse);
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("undecodable envelope (schema " + id + ")", e);
    }
  }
}
