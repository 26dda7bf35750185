// Runs the fsdp4j command line in-process, as main() would, capturing stdout and stderr.
package org.fsdp4j.cli;

import java.io.PrintWriter;
import java.io.StringWriter;

final class CliRunner {

    record Result(int exitCode, String out, String err) {
    }

    private CliRunner() {
    }

    static Result run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Main.commandLine().setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true)).execute(args);
        return new Result(code, out.toString(), err.toString());
    }
}
