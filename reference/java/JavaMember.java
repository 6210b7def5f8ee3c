// Kafka 2.8.2's Java consumer as a group member, driven by lines on stdin (reference/javaclient.py's JavaMember).
//
//   java JavaMember BOOTSTRAP GROUP TOPIC[,TOPIC...] [key=value ...]     consumer configs
//
// stdin, one command a line:
//   poll MS                      consumer.poll(MS ms)
//   commit [TOPIC PARTITION OFFSET ...]   commitSync of these offsets (none given: the positions of every
//                                assigned partition); waits up to default.api.timeout.ms
//   committed TOPIC PARTITION ...         the group's committed offsets (OffsetFetch)
// stdout, one JSON object a line ("t/p" names a partition):
//   {"ready": true}
//   {"assigned": ["t/p", ...], "generation": G, "member": "..."}   from the rebalance listener, during a poll
//   {"revoked": [...]} and {"lost": [...]}                          likewise
//   {"polled": [[topic, partition, offset, key, value, [[header, value], ...]], ...], "generation": G,
//    "member": "..."}             keys and values base64 (null for null)
//   {"poll_failed": "ExceptionName", "message": "..."}
//   {"committed": {"t/p": offset, ...}, "generation": G, "member": "..."}    commitSync returned
//   {"commit_failed": "CommitFailedException", "message": "...", "retriable": false}
//   {"fetched": {"t/p": offset or -1, ...}}     {"fetch_failed": ...}
//   {"closed": true}               at the end of stdin, once consumer.close() (leaving the group) returned
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

public class JavaMember {
    static final ObjectMapper JSON = new ObjectMapper();
    static KafkaConsumer<byte[], byte[]> consumer;

    static void emit(Map<String, Object> m) {
        try {
            System.out.println(JSON.writeValueAsString(m));
            System.out.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static String b64(byte[] b) {
        return b == null ? null : Base64.getEncoder().encodeToString(b);
    }

    static String name(TopicPartition tp) {
        return tp.topic() + "/" + tp.partition();
    }

    static List<String> names(Collection<TopicPartition> tps) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : tps) out.add(name(tp));
        out.sort(null);
        return out;
    }

    static Map<String, Object> group(Map<String, Object> m) {
        m.put("generation", consumer.groupMetadata().generationId());
        m.put("member", consumer.groupMetadata().memberId());
        return m;
    }

    static Map<String, Object> failure(String key, Exception e) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(key, e.getClass().getSimpleName());
        m.put("message", String.valueOf(e.getMessage()));
        m.put("retriable", e instanceof RetriableException);
        return m;
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("enable.auto.commit", "false");
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        consumer.subscribe(Arrays.asList(args[2].split(",")), new ConsumerRebalanceListener() {
            @Override public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("assigned", names(tps));
                emit(group(m));
            }

            @Override public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("revoked", names(tps));
                emit(m);
            }

            @Override public void onPartitionsLost(Collection<TopicPartition> tps) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("lost", names(tps));
                emit(m);
            }
        });
        emit(Map.of("ready", true));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "poll": poll(Long.parseLong(f[1])); break;
                case "commit": commit(f); break;
                case "committed": committed(f); break;
                case "": break;
                default: emit(Map.of("bad_command", line));
            }
        }
        consumer.close();
        emit(Map.of("closed", true));
        Runtime.getRuntime().halt(0);
    }

    static void poll(long ms) {
        ConsumerRecords<byte[], byte[]> got;
        try {
            got = consumer.poll(Duration.ofMillis(ms));
        } catch (Exception e) {
            emit(failure("poll_failed", e));
            return;
        }
        List<Object> records = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : got) {
            List<Object> headers = new ArrayList<>();
            for (Header h : r.headers()) headers.add(Arrays.asList(h.key(), b64(h.value())));
            records.add(Arrays.asList(r.topic(), r.partition(), r.offset(), b64(r.key()), b64(r.value()), headers));
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("polled", records);
        emit(group(m));
    }

    static void commit(String[] f) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        try {
            if (f.length == 1) {
                for (TopicPartition tp : consumer.assignment()) offsets.put(tp, new OffsetAndMetadata(consumer.position(tp)));
            }
            for (int i = 1; i + 2 < f.length; i += 3) {
                offsets.put(new TopicPartition(f[i], Integer.parseInt(f[i + 1])), new OffsetAndMetadata(Long.parseLong(f[i + 2])));
            }
            consumer.commitSync(offsets);
        } catch (Exception e) {
            emit(failure("commit_failed", e));
            return;
        }
        Map<String, Object> done = new TreeMap<>();
        offsets.forEach((tp, om) -> done.put(name(tp), om.offset()));
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("committed", done);
        emit(group(m));
    }

    static void committed(String[] f) {
        Set<TopicPartition> tps = new HashSet<>();
        for (int i = 1; i + 1 < f.length; i += 2) tps.add(new TopicPartition(f[i], Integer.parseInt(f[i + 1])));
        Map<TopicPartition, OffsetAndMetadata> got;
        try {
            got = consumer.committed(tps);
        } catch (Exception e) {
            emit(failure("fetch_failed", e));
            return;
        }
        Map<String, Object> out = new TreeMap<>();
        for (TopicPartition tp : tps) {
            OffsetAndMetadata om = got.get(tp);
            out.put(name(tp), om == null ? -1 : om.offset());
        }
        emit(Map.of("fetched", out));
    }
}
