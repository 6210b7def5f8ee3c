// Kafka's command-line tools, several invocations in one JVM (reference/javaclient.py's ToolRunner).
//
// Each line on stdin is a JSON array: the tool's main class, then its arguments, e.g.
//   ["kafka.admin.TopicCommand", "--bootstrap-server", "127.0.0.1:9092", "--list"]
// It says {"ready": true} first; then each invocation answers with one JSON line on stdout:
//   {"rc": 0, "out": "what the tool printed", "err": "what it logged or printed on stderr", "ms": 812}
// "rc" is the status the tool exited with, 0 when main returns, and 1 with the exception in "err" when main
// throws.  Kafka's tools exit through org.apache.kafka.common.utils.Exit, whose exit and halt procedures are
// replaced here by ones that end the invocation instead of the JVM; a tool calling System.exit itself
// is stopped by a security manager (the JVM runs with -Djava.security.manager=allow).  A tool that adds a JVM
// shutdown hook expects its JVM to end with it (VerifiableProducer flushes and reports in one), and one that keeps
// state in static fields cannot run twice (ConsoleConsumer counts messages in one): reference/javaclient.py runs
// only the tools of its SHARED_JVM_TOOLS here, and any other in a JVM of its own.
// The JVM ends when stdin does.
//
// The tools print through System.out and Scala's Console (which takes System.out when it is first used),
// so both are given, once and before any tool runs, streams whose target is switched per invocation.
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.utils.Exit;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public class KafkaTools {
    /** Thrown by the replaced exit procedure: the tool asked to exit with {@code code}. */
    static final class ToolExit extends Error {
        final int code;

        ToolExit(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    /** An output stream writing to whatever buffer the current invocation set. */
    static final class Switch extends OutputStream {
        private OutputStream target = OutputStream.nullOutputStream();

        synchronized void to(OutputStream t) {
            target = t;
        }

        @Override public synchronized void write(int b) throws java.io.IOException {
            target.write(b);
        }

        @Override public synchronized void write(byte[] b, int off, int len) throws java.io.IOException {
            target.write(b, off, len);
        }
    }

    /** Turns System.exit inside an invocation into a ToolExit; permits everything else. */
    @SuppressWarnings("removal")
    static final class NoExit extends SecurityManager {
        volatile boolean inTool;
        volatile int lastExit = Integer.MIN_VALUE;

        @Override public void checkExit(int status) {
            if (inTool) {
                lastExit = status;
                throw new ToolExit(status);
            }
        }

        @Override public void checkPermission(java.security.Permission perm) {
        }

        @Override public void checkPermission(java.security.Permission perm, Object context) {
        }
    }

    @SuppressWarnings("removal")
    public static void main(String[] args) throws Exception {
        PrintStream answers = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        Switch out = new Switch();
        Switch err = new Switch();
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        final int[] lastExit = {Integer.MIN_VALUE};
        Exit.setExitProcedure((code, message) -> {
            lastExit[0] = code;
            throw new ToolExit(code);
        });
        Exit.setHaltProcedure((code, message) -> {
            lastExit[0] = code;
            throw new ToolExit(code);
        });
        NoExit noExit = new NoExit();
        System.setSecurityManager(noExit);
        ObjectMapper json = new ObjectMapper();
        answers.println("{\"ready\": true}");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            List<?> argv = json.readValue(line, List.class);
            String cls = (String) argv.get(0);
            String[] toolArgs = argv.subList(1, argv.size()).stream().map(Object::toString).toArray(String[]::new);
            ByteArrayOutputStream o = new ByteArrayOutputStream();
            ByteArrayOutputStream e = new ByteArrayOutputStream();
            out.to(o);
            err.to(e);
            lastExit[0] = Integer.MIN_VALUE;
            noExit.lastExit = Integer.MIN_VALUE;
            long t0 = System.nanoTime();
            int rc = 0;
            noExit.inTool = true;
            try {
                Method main = Class.forName(cls).getMethod("main", String[].class);
                main.invoke(null, (Object) toolArgs);
            } catch (InvocationTargetException ite) {
                Throwable cause = ite.getCause();
                if (cause instanceof ToolExit) {
                    rc = ((ToolExit) cause).code;
                } else {
                    rc = 1;
                    System.err.println("uncaught: " + stack(cause));
                }
            } catch (ReflectiveOperationException roe) {
                rc = 1;
                System.err.println("no tool " + cls + ": " + roe);
            }
            noExit.inTool = false;
            if (rc == 0 && lastExit[0] != Integer.MIN_VALUE) rc = lastExit[0];   // an exit a tool caught
            if (rc == 0 && noExit.lastExit != Integer.MIN_VALUE) rc = noExit.lastExit;
            System.out.flush();
            System.err.flush();
            out.to(OutputStream.nullOutputStream());
            err.to(OutputStream.nullOutputStream());
            Map<String, Object> answer = new LinkedHashMap<>();
            answer.put("rc", rc);
            answer.put("out", o.toString(StandardCharsets.UTF_8));
            answer.put("err", e.toString(StandardCharsets.UTF_8));
            answer.put("ms", (System.nanoTime() - t0) / 1_000_000);
            answers.println(json.writeValueAsString(answer));
        }
        answers.flush();
        Runtime.getRuntime().halt(0);   // a tool's leftover non-daemon thread must not keep the JVM up
    }

    static String stack(Throwable t) {
        StringWriter w = new StringWriter();
        t.printStackTrace(new PrintWriter(w));
        return w.toString();
    }
}
