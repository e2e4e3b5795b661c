// Runs several of Kafka's command-line tool classes one after another in one JVM, each as its own
// `java <class> <args>` run would: its standard output and error captured apart, its exit code the
// one it first passes to Kafka's Exit, and nothing it prints after that call (the process would
// have ended there; here the call throws, and a tool may catch that and go on printing). A return
// from main is exit 0; an exception out of main is printed as the JVM prints it, and is exit 1.
// Saves a JVM start (1-2 s on a busy 2-core machine) per command.
//
// Input (stdin): one command per line, the class and its arguments separated by tabs.
// Output (stdout): per command, in order, "RESULT <exit code> <stdout, base64> <stderr, base64>".
// Logging follows System.err when the logging configuration says so (log4j's Follow=true); Scala
// code's println (scala.Console, kafka.admin.ConfigCommand in 3.x) is redirected with
// Console.withOut / withErr.
//
// Uses only the JDK, and Kafka's Exit class by reflection (org.apache.kafka.common.utils.Exit up
// to Kafka 3.x, ...utils.internals.Exit in 4.x), so one compiled class serves every version.
// bench/apache_kafka.py (run_kafka_tools) compiles and runs it.

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;

public final class ToolBatch {
    /** Thrown by Kafka's Exit.exit / Exit.halt instead of ending the JVM. */
    private static final class ToolExit extends Error {
        final int code;

        ToolExit(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    /** The running command's output, and what it had written when it first called Exit. */
    private static PrintStream toolOut;
    private static PrintStream toolErr;
    private static ByteArrayOutputStream out;
    private static ByteArrayOutputStream err;
    private static Integer exitCode;
    private static int outAtExit;
    private static int errAtExit;

    private static ToolExit exitCalled(int code) {
        if (exitCode == null) {
            toolOut.flush();
            toolErr.flush();
            exitCode = code;
            outAtExit = out.size();
            errAtExit = err.size();
        }
        return new ToolExit(code);
    }

    private static Class<?> exitClass() throws ClassNotFoundException {
        try {
            return Class.forName("org.apache.kafka.common.utils.Exit");
        } catch (ClassNotFoundException e) {
            return Class.forName("org.apache.kafka.common.utils.internals.Exit");
        }
    }

    private static void interceptExit() throws ReflectiveOperationException {
        Class<?> exit = exitClass();
        Class<?> procedure = Class.forName(exit.getName() + "$Procedure");
        Object throwing = Proxy.newProxyInstance(procedure.getClassLoader(), new Class<?>[] {procedure},
            (proxy, method, args) -> {
                if (method.getName().equals("execute")) {
                    throw exitCalled((Integer) args[0]);
                }
                if (method.getName().equals("hashCode")) {
                    return System.identityHashCode(proxy);
                }
                if (method.getName().equals("equals")) {
                    return proxy == args[0];
                }
                return "ToolBatch exit procedure";
            });
        exit.getMethod("setExitProcedure", procedure).invoke(null, throwing);
        exit.getMethod("setHaltProcedure", procedure).invoke(null, throwing);
    }

    /** Call ``main`` of ``className``, inside scala.Console.withOut/withErr when Scala is there. */
    private static void runMain(String className, String[] args) throws Throwable {
        Method main = Class.forName(className).getMethod("main", String[].class);
        Class<?> console;
        try {
            console = Class.forName("scala.Console$");
        } catch (ClassNotFoundException e) {
            main.invoke(null, (Object) args);
            return;
        }
        Object module = console.getField("MODULE$").get(null);
        Class<?> function0 = Class.forName("scala.Function0");
        Method withOut = console.getMethod("withOut", PrintStream.class, function0);
        Method withErr = console.getMethod("withErr", PrintStream.class, function0);
        Object callMain = scalaFunction(function0, () -> main.invoke(null, (Object) args));
        Object withRedirectedErr = scalaFunction(function0, () -> withErr.invoke(module, toolErr, callMain));
        withOut.invoke(module, toolOut, withRedirectedErr);
    }

    private interface Body {
        Object run() throws Throwable;
    }

    /** A scala.Function0 whose apply() runs ``body``, passing on what it throws (unwrapped). */
    private static Object scalaFunction(Class<?> function0, Body body) {
        return Proxy.newProxyInstance(function0.getClassLoader(), new Class<?>[] {function0}, (proxy, method, args) -> {
            switch (method.getName()) {
                case "apply":
                    try {
                        return body.run();
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                case "hashCode":
                    return System.identityHashCode(proxy);
                case "equals":
                    return proxy == args[0];
                case "toString":
                    return "ToolBatch";
                default:
                    return InvocationHandler.invokeDefault(proxy, method, args);
            }
        });
    }

    public static void main(String[] argv) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        interceptExit();
        Base64.Encoder base64 = Base64.getEncoder();
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = commands.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] fields = line.split("\t", -1);
            String[] args = Arrays.copyOfRange(fields, 1, fields.length);
            out = new ByteArrayOutputStream();
            err = new ByteArrayOutputStream();
            toolOut = new PrintStream(out, true, StandardCharsets.UTF_8);
            toolErr = new PrintStream(err, true, StandardCharsets.UTF_8);
            exitCode = null;
            System.setOut(toolOut);
            System.setErr(toolErr);
            int code = 0;
            try {
                runMain(fields[0], args);
            } catch (Throwable thrown) {
                Throwable cause = thrown instanceof InvocationTargetException ? thrown.getCause() : thrown;
                if (!(cause instanceof ToolExit)) {
                    toolErr.print("Exception in thread \"main\" ");
                    cause.printStackTrace(toolErr);
                    code = 1;
                }
            } finally {
                toolOut.flush();
                toolErr.flush();
                System.setOut(realOut);
                System.setErr(realErr);
            }
            byte[] printed = out.toByteArray();
            byte[] complained = err.toByteArray();
            if (exitCode != null) {
                code = exitCode;
                printed = Arrays.copyOf(printed, outAtExit);
                complained = Arrays.copyOf(complained, errAtExit);
            }
            realOut.println("RESULT " + code + " " + base64.encodeToString(printed) + " "
                + base64.encodeToString(complained));
            realOut.flush();
        }
        realOut.flush();
        Runtime.getRuntime().halt(0);  // whatever threads a tool left behind
    }
}
