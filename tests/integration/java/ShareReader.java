import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

// Kafka's own share consumer (kafka-clients' KafkaShareConsumer) as one member of a share
// group beside kafkawire's, for tests/integration/test_share_groups.py: prints
// "record<TAB>partition<TAB>offset<TAB>delivery count" per record (implicitly accepted),
// and stops once it has had records and then none for idle seconds, or after max seconds.
// Arguments: bootstrap servers, group id, topic, idle seconds, max seconds, and optionally
// a record count: then no line per record, but "count<TAB>n<TAB>ms" once that many came
// (ms from the first record to the last; bench/compare_share.py).
public class ShareReader {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        long idleMs = Long.parseLong(args[3]) * 1000, end = System.currentTimeMillis() + Long.parseLong(args[4]) * 1000;
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(List.of(args[2]));
            System.out.println("subscribed");
            System.out.flush();
            long last = -1, first = -1, n = 0, want = args.length > 5 ? Long.parseLong(args[5]) : -1;
            while (System.currentTimeMillis() < end && (last < 0 || System.currentTimeMillis() - last < idleMs)) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                if (want >= 0) {
                    if (recs.count() > 0 && first < 0) first = System.nanoTime();
                    n += recs.count();
                    if (n >= want) {
                        System.out.println("count\t" + n + "\t" + (System.nanoTime() - first) / 1000000);
                        break;
                    }
                    continue;
                }
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    System.out.println("record\t" + r.partition() + "\t" + r.offset() + "\t" + r.deliveryCount().orElse((short) -1));
                    last = System.currentTimeMillis();
                }
                System.out.flush();
            }
            c.commitSync();
        }
    }
}
