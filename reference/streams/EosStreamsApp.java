// A small Kafka Streams 2.8.2 application with processing.guarantee=exactly_once (reference/javaclient.py's
// JavaStreamsApp): SOURCE's records, each value prefixed with "out-", to SINK (same key), one task per source
// partition, each task's producer transactional (transactional.id APP_ID-<task>).
//
//   java EosStreamsApp BOOTSTRAP APP_ID SOURCE SINK STATE_DIR [key=value ...]   Streams configs
//
// stdin: its end closes the application and exits.
// stdout, one JSON object a line:
//   {"ready": true}                                   once KafkaStreams.start() returned
//   {"state": "RUNNING", "from": "REBALANCING"}        each state change of the application
//   {"thread_error": "ExceptionName", "message": ...}  a stream thread died (it is replaced: REPLACE_THREAD)
//   {"closed": true}                                   at the end
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

public class EosStreamsApp {
    static final ObjectMapper JSON = new ObjectMapper();

    static synchronized void emit(Map<String, Object> m) {
        try {
            System.out.println(JSON.writeValueAsString(m));
            System.out.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArray().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArray().getClass());
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        StreamsBuilder builder = new StreamsBuilder();
        byte[] prefix = "out-".getBytes(StandardCharsets.UTF_8);
        builder.<byte[], byte[]>stream(args[2]).mapValues(v -> {
            byte[] out = new byte[prefix.length + (v == null ? 0 : v.length)];
            System.arraycopy(prefix, 0, out, 0, prefix.length);
            if (v != null) System.arraycopy(v, 0, out, prefix.length, v.length);
            return out;
        }).to(args[3]);
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("state", now.name());
            m.put("from", before.name());
            emit(m);
        });
        streams.setUncaughtExceptionHandler(e -> {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("thread_error", e.getClass().getSimpleName());
            m.put("message", String.valueOf(e.getMessage()));
            emit(m);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        emit(Map.of("ready", true));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) { }
        streams.close(Duration.ofSeconds(30));
        emit(Map.of("closed", true));
        Runtime.getRuntime().halt(0);
    }
}
