// The exit codes of the fsdp4j command line, one per kind of ending, as docs/training.md ("Exit
// codes") lists them. A user-caused failure prints one line ("error: ...") and exits with its code;
// only INTERNAL prints a stack trace, because only a bug should end a run that way.
package org.fsdp4j.cli;

enum ExitCode {
    /** The command did what it was asked. */
    OK(0),
    /** A flag value, the data file, the output or save directory is not usable (found before step 1). */
    BAD_INPUT(1),
    /** A flag picocli cannot parse (unknown option, a word where a number belongs). */
    USAGE(2),
    /** Training diverged: a non-finite loss or gradients, or fp16's loss scale at its floor. The summary is written. */
    DIVERGED(3),
    /** The run does not fit in memory: refused by the preflight, or an allocation failed. */
    OUT_OF_MEMORY(4),
    /** Another run holds the --out or --save-dir directory. */
    OUTPUT_IN_USE(5),
    /** A file failed midway: writing a report or a checkpoint (disk full, directory removed), or reading weights (an I/O error). */
    IO_ERROR(6),
    /** A rank failed or stopped answering (collective timeout, a peer that died, ranks that disagree on a collective). */
    RANK_FAILED(7),
    /** bench gemm: the backend's results failed the fp64 check ({@code #wrong > 0}). */
    WRONG_RESULTS(8),
    /** A checkpoint to resume, inspect, export or generate from is incomplete, corrupted, or of another model. */
    BAD_CHECKPOINT(9),
    /**
     * The processes of a run could not form it: the master address unreachable or its port taken,
     * a process that did not join within --collective-timeout, two processes with one rank.
     */
    RENDEZVOUS_FAILED(10),
    /** The processes of a run were started with different settings (the message lists them). */
    SETTINGS_DIFFER(11),
    /** A bug in fsdp4j: the message asks for a report and the stack trace follows. */
    INTERNAL(70),
    /** Interrupted by SIGINT (Ctrl-C), 128 + 2: the summary of the steps done is written. */
    SIGINT(130),
    /** Stopped by SIGTERM, 128 + 15: the summary of the steps done is written. */
    SIGTERM(143);

    private final int code;

    ExitCode(int code) {
        this.code = code;
    }

    int code() {
        return code;
    }
}
