package bench.kstreams;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** The drain benchmark's Kafka tools (Main). Each prints JSON lines on stdout; BOOTSTRAP names the broker. */
final class Tools {
  private Tools() {}

  /** copy FROM TO P:O,P:O…: FROM's records from those offsets to its end at the start, into TO (same partitions, bytes, keys, timestamps, headers). */
  static void copy(String[] args) throws Exception {
    String from = args[0];
    String to = args[1];
    Map<Integer, Long> start = new HashMap<>();
    if (args.length > 2 && !args[2].isEmpty()) {
      for (String po : args[2].split(",")) {
        String[] p = po.split(":");
        start.put(Integer.parseInt(p[0]), Long.parseLong(p[1]));
      }
    }
    try (Admin admin = Admin.create(common());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps())) {
      int partitions = admin.describeTopics(List.of(from)).allTopicNames().get().get(from).partitions().size();
      createTopic(admin, new NewTopic(to, partitions, (short) 1));
      List<TopicPartition> tps = new ArrayList<>();
      for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(from, p));
      consumer.assign(tps);
      Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
      for (TopicPartition tp : tps) {
        Long o = start.get(tp.partition());
        if (o == null) consumer.seekToBeginning(List.of(tp));
        else consumer.seek(tp, o);
      }
      long copied = 0;
      long bytes = 0;
      Set<TopicPartition> pending = new HashSet<>();
      for (TopicPartition tp : tps) if (consumer.position(tp) < ends.get(tp)) pending.add(tp);
      while (!pending.isEmpty()) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
          TopicPartition tp = new TopicPartition(r.topic(), r.partition());
          if (r.offset() >= ends.get(tp)) continue;
          producer.send(new ProducerRecord<>(to, r.partition(), r.timestamp(), r.key(), r.value(), r.headers()));
          copied++;
          bytes += r.value() == null ? 0 : r.value().length;
        }
        pending.removeIf(tp -> consumer.position(tp) >= ends.get(tp));
      }
      producer.flush();
      System.out.println("{\"copied\":" + copied + ",\"valueBytes\":" + bytes + ",\"partitions\":" + partitions + "}");
    }
  }

  /** table TOPIC FILE: FILE's lines `key<TAB>value` into a new compacted one-partition topic. */
  static void table(String[] args) throws Exception {
    String topic = args[0];
    List<String> lines = Files.readAllLines(Path.of(args[1]), StandardCharsets.UTF_8);
    try (Admin admin = Admin.create(common());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps())) {
      createTopic(admin, new NewTopic(topic, 1, (short) 1).configs(Map.of("cleanup.policy", "compact")));
      for (String line : lines) {
        int tab = line.indexOf('\t');
        if (tab < 0) continue;
        producer.send(
            new ProducerRecord<>(
                topic, line.substring(0, tab).getBytes(StandardCharsets.UTF_8), line.substring(tab + 1).getBytes(StandardCharsets.UTF_8)));
      }
      producer.flush();
      System.out.println("{\"records\":" + lines.size() + "}");
    }
  }

  /**
   * watch TOPIC EXPECTED PARTITIONS KEY_PREFIX: from TOPIC's end now (its last stable offsets; the topic is created
   * with PARTITIONS when missing), counts the records whose key starts with KEY_PREFIX as they become visible
   * read_committed; prints `{"t":ms,"n":count}` as the count moves, and at EXPECTED the count, the distinct keys and
   * the time the last one was seen, then exits. Prints `{"ready":true}` once its start positions are fixed.
   */
  static void watch(String[] args) throws Exception {
    String topic = args[0];
    long expected = Long.parseLong(args[1]);
    int partitionsIfNew = Integer.parseInt(args[2]);
    byte[] prefix = args[3].getBytes(StandardCharsets.UTF_8);
    Properties props = consumerProps();
    props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 4 * 1024 * 1024);
    try (Admin admin = Admin.create(common());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      createTopic(admin, new NewTopic(topic, partitionsIfNew, (short) 1));
      int partitions = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
      List<TopicPartition> tps = new ArrayList<>();
      for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
      consumer.assign(tps);
      consumer.seekToEnd(tps);
      for (TopicPartition tp : tps) consumer.position(tp);
      System.out.println("{\"ready\":true}");
      long n = 0;
      long last = 0;
      long printed = -1;
      long printedAt = 0;
      Set<String> keys = new HashSet<>();
      while (n < expected) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(20))) {
          if (!startsWith(r.key(), prefix)) continue;
          n++;
          keys.add(new String(r.key(), StandardCharsets.UTF_8));
          last = System.currentTimeMillis();
        }
        long now = System.currentTimeMillis();
        if (n != printed && now - printedAt >= 50) {
          System.out.println("{\"t\":" + now + ",\"n\":" + n + "}");
          printed = n;
          printedAt = now;
        }
      }
      System.out.println("{\"done\":true,\"t\":" + last + ",\"n\":" + n + ",\"distinct\":" + keys.size() + "}");
    }
  }

  /** delete PREFIX: removes every topic whose name starts with PREFIX (the baseline's topics and its internal ones). */
  static void delete(String[] args) throws Exception {
    try (Admin admin = Admin.create(common())) {
      List<String> doomed = admin.listTopics().names().get().stream().filter(t -> t.startsWith(args[0])).toList();
      if (!doomed.isEmpty()) admin.deleteTopics(doomed).all().get();
      System.out.println("{\"deleted\":" + doomed.size() + "}");
    }
  }

  private static void createTopic(Admin admin, NewTopic topic) throws Exception {
    try {
      admin.createTopics(List.of(topic)).all().get();
    } catch (ExecutionException e) {
      if (!(e.getCause() instanceof TopicExistsException)) throw e;
    }
  }

  private static boolean startsWith(byte[] key, byte[] prefix) {
    if (key == null || key.length < prefix.length) return false;
    for (int i = 0; i < prefix.length; i++) if (key[i] != prefix[i]) return false;
    return true;
  }

  private static Properties common() {
    Properties p = new Properties();
    p.put("bootstrap.servers", Main.env("BOOTSTRAP"));
    return p;
  }

  private static Properties consumerProps() {
    Properties p = common();
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    return p;
  }

  private static Properties producerProps() {
    Properties p = common();
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.LINGER_MS_CONFIG, 20);
    p.put(ProducerConfig.BATCH_SIZE_CONFIG, 512 * 1024);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    return p;
  }
}
