import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;

// What Kafka's own Admin client (kafka-clients) reports about reassignments, the cluster's
// brokers, its features and log directories, one tab-separated line per item, for the admin tests to compare.
// Arguments: bootstrap servers, then the broker ids whose log directories to describe.
public class ClusterView {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            for (Map.Entry<TopicPartition, PartitionReassignment> e : admin.listPartitionReassignments().reassignments().get().entrySet()) {
                PartitionReassignment r = e.getValue();
                System.out.println("reassignment\t" + e.getKey() + "\t" + r.replicas() + "\t" + r.addingReplicas() + "\t" + r.removingReplicas());
            }
            for (Node n : admin.describeCluster(new DescribeClusterOptions().includeFencedBrokers(true)).nodes().get())
                System.out.println("node\t" + n.id() + "\t" + n.host() + "\t" + n.port() + "\t" + n.isFenced());
            FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
            for (Map.Entry<String, FinalizedVersionRange> e : f.finalizedFeatures().entrySet())
                System.out.println("finalized\t" + e.getKey() + "\t" + e.getValue().minVersionLevel() + "\t" + e.getValue().maxVersionLevel());
            for (Map.Entry<String, SupportedVersionRange> e : f.supportedFeatures().entrySet())
                System.out.println("supported\t" + e.getKey() + "\t" + e.getValue().minVersion() + "\t" + e.getValue().maxVersion());
            System.out.println("epoch\t" + f.finalizedFeaturesEpoch().orElse(-1L));
            List<Integer> brokers = new ArrayList<>();
            for (int i = 1; i < args.length; i++) brokers.add(Integer.parseInt(args[i]));
            for (Map.Entry<Integer, Map<String, LogDirDescription>> b : admin.describeLogDirs(brokers).allDescriptions().get().entrySet())
                for (Map.Entry<String, LogDirDescription> d : b.getValue().entrySet()) {
                    LogDirDescription x = d.getValue();
                    System.out.println("logdir\t" + b.getKey() + "\t" + d.getKey() + "\t" + (x.error() == null ? "-" : x.error().getClass().getSimpleName()) + "\t" + x.totalBytes().orElse(-1));
                    for (Map.Entry<TopicPartition, ReplicaInfo> r : x.replicaInfos().entrySet())
                        System.out.println("replica\t" + b.getKey() + "\t" + d.getKey() + "\t" + r.getKey() + "\t" + r.getValue().size() + "\t" + r.getValue().offsetLag() + "\t" + r.getValue().isFuture());
                }
        }
    }
}
