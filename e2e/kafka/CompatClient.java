// Kafka's Java client (kafka-clients) against a Strom cluster, with the client's defaults
// (acks=all, enable.idempotence=true) and nothing tuned: what most applications run.
//
//   java CompatClient roundtrip <bootstrap> <topic> <records-per-codec> <group>
//       For each codec (none, gzip, snappy, lz4, zstd) one producer sends records with a key,
//       a value naming codec and sequence, and a header; then one group consumer (classic
//       protocol, subscribe) reads until it has seen every acknowledged record or 60 s pass,
//       committing synchronously. Checks every acknowledged record arrives exactly once with
//       its key, header and offset, and that offsets rise within each partition. Prints one
//       summary line and exits 0 only if all of that holds.
//   java CompatClient group-protocol <bootstrap> <topic> <classic|consumer>
//       One consumer with the given group.protocol polls for up to 20 s and prints
//       "consumed N" or "error <exception class>: <message>"; exits 0 when it consumed, 1 on
//       an error.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class CompatClient {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    public static void main(String[] args) throws Exception {
        if (args.length == 5 && args[0].equals("roundtrip")) {
            System.exit(roundtrip(args[1], args[2], Integer.parseInt(args[3]), args[4]));
        } else if (args.length == 4 && args[0].equals("group-protocol")) {
            System.exit(groupProtocol(args[1], args[2], args[3]));
        }
        System.err.println("usage: CompatClient roundtrip <bootstrap> <topic> <records-per-codec> <group>");
        System.err.println("       CompatClient group-protocol <bootstrap> <topic> <classic|consumer>");
        System.exit(2);
    }

    static int roundtrip(String bootstrap, String topic, int perCodec, String group) throws Exception {
        // value -> offset the producer was told
        Map<String, RecordMetadata> acked = new ConcurrentHashMap<>();
        List<String> sendErrors = Collections.synchronizedList(new ArrayList<>());
        for (String codec : CODECS) {
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < perCodec; i++) {
                    String value = codec + ":" + i;
                    ProducerRecord<String, String> r = new ProducerRecord<>(topic, "key-" + (i % 97), value);
                    r.headers().add("codec", codec.getBytes());
                    producer.send(r, (md, e) -> {
                        if (e != null) sendErrors.add(value + ": " + e);
                        else acked.put(value, md);
                    });
                }
                producer.flush();
            }
        }
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Map<String, Integer> seen = new HashMap<>();
        Map<TopicPartition, Long> lastOffset = new HashMap<>();
        int wrong = 0, reordered = 0;
        long deadline = System.currentTimeMillis() + 60_000;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            while (countAcked(seen, acked) < acked.size() && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : records) {
                    seen.merge(r.value(), 1, Integer::sum);
                    RecordMetadata md = acked.get(r.value());
                    String codec = r.value().substring(0, r.value().indexOf(':'));
                    int i = Integer.parseInt(r.value().substring(codec.length() + 1));
                    Header h = r.headers().lastHeader("codec");
                    boolean ok = md != null && md.partition() == r.partition() && md.offset() == r.offset()
                        && r.key().equals("key-" + (i % 97)) && h != null && new String(h.value()).equals(codec);
                    if (!ok) wrong++;
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    Long last = lastOffset.put(tp, r.offset());
                    if (last != null && last >= r.offset()) reordered++;
                }
                if (!records.isEmpty()) consumer.commitSync();
            }
        }
        int duplicates = 0;
        for (int n : seen.values()) if (n > 1) duplicates += n - 1;
        int missing = acked.size() - countAcked(seen, acked);
        System.out.printf("sent=%d acked=%d send_errors=%d consumed_distinct=%d missing=%d duplicates=%d wrong=%d reordered=%d%n",
            perCodec * CODECS.length, acked.size(), sendErrors.size(), seen.size(), missing, duplicates, wrong, reordered);
        for (String e : sendErrors.subList(0, Math.min(5, sendErrors.size()))) System.out.println("send error " + e);
        boolean ok = sendErrors.isEmpty() && acked.size() == perCodec * CODECS.length && missing == 0
            && duplicates == 0 && wrong == 0 && reordered == 0;
        return ok ? 0 : 1;
    }

    static int countAcked(Map<String, Integer> seen, Map<String, RecordMetadata> acked) {
        int n = 0;
        for (String v : seen.keySet()) if (acked.containsKey(v)) n++;
        return n;
    }

    static int groupProtocol(String bootstrap, String topic, String protocol) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, "protocol-" + protocol);
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        long deadline = System.currentTimeMillis() + 20_000;
        int consumed = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            while (consumed == 0 && System.currentTimeMillis() < deadline) {
                consumed += consumer.poll(Duration.ofMillis(500)).count();
            }
        } catch (Exception e) {
            System.out.println("error " + e.getClass().getName() + ": " + e.getMessage());
            return 1;
        }
        System.out.println("consumed " + consumed);
        return consumed > 0 ? 0 : 1;
    }
}
