import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;

// What Kafka's own Admin client (kafka-clients) reports about transactions and producers, one
// tab-separated line per item, for tests/integration/test_admin_transactions.py to compare.
// Arguments: bootstrap servers, then transactional ids and topic:partition pairs.
public class TransactionsView {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            for (TransactionListing t : admin.listTransactions().all().get())
                System.out.println("listing\t" + t.transactionalId() + "\t" + t.producerId() + "\t" + t.state());
            List<String> ids = new ArrayList<>();
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 1; i < args.length; i++) {
                if (args[i].contains(":")) { String[] x = args[i].split(":"); tps.add(new TopicPartition(x[0], Integer.parseInt(x[1]))); }
                else ids.add(args[i]);
            }
            for (Map.Entry<String, TransactionDescription> e : admin.describeTransactions(ids).all().get().entrySet()) {
                TransactionDescription d = e.getValue();
                System.out.println("transaction\t" + e.getKey() + "\t" + d.coordinatorId() + "\t" + d.state() + "\t" + d.producerId() + "\t" + d.producerEpoch() + "\t" + d.transactionTimeoutMs() + "\t" + d.transactionStartTimeMs().orElse(-1) + "\t" + d.topicPartitions());
            }
            for (Map.Entry<TopicPartition, DescribeProducersResult.PartitionProducerState> e : admin.describeProducers(tps).all().get().entrySet())
                for (ProducerState s : e.getValue().activeProducers())
                    System.out.println("producer\t" + e.getKey() + "\t" + s.producerId() + "\t" + s.producerEpoch() + "\t" + s.lastSequence() + "\t" + s.lastTimestamp() + "\t" + s.coordinatorEpoch().orElse(-1) + "\t" + s.currentTransactionStartOffset().orElse(-1));
        }
    }
}
