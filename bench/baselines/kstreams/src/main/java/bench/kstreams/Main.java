package bench.kstreams;

import java.util.Arrays;

/**
 * Entry point of the baseline's jar. {@code streams}: the Kafka Streams application (Pipeline). The others are the
 * drain benchmark's Kafka tools, written against the reference client so the measurement does not depend on which
 * Node client the service uses: {@code copy} (the preloaded records into the baseline's own topic, byte for byte),
 * {@code table} (the identity table from a file), {@code watch} (counts a topic's committed records) and
 * {@code delete} (removes the baseline's topics after the run).
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws Exception {
    if (args.length == 0) {
      System.err.println("usage: streams | copy <from> <to> <partition:offset,...> | table <topic> <file> | watch <topic> <expected> <partitions> <key-prefix> | delete <topic-prefix>");
      System.exit(2);
    }
    String[] rest = Arrays.copyOfRange(args, 1, args.length);
    switch (args[0]) {
      case "streams" -> Pipeline.run();
      case "copy" -> Tools.copy(rest);
      case "table" -> Tools.table(rest);
      case "watch" -> Tools.watch(rest);
      case "delete" -> Tools.delete(rest);
      default -> {
        System.err.println("unknown command " + args[0]);
        System.exit(2);
      }
    }
  }

  /** A required environment variable; a missing one stops the start with its name. */
  static String env(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) throw new IllegalArgumentException(name + " is not set");
    return v;
  }
}
