// A run over several processes whose --save-dir (or --resume directory) is not one directory that
// every process sees: a process cannot find what another wrote there. Each process writes its own
// ranks' files into the one checkpoint directory, so the directory must be on a filesystem shared
// by every node. Bad input (exit 1): the message names the directory, who cannot see what, and the fix.
package org.fsdp4j.checkpoint;

import java.nio.file.Path;

public final class SaveDirNotSharedException extends IllegalArgumentException {

    private static final long serialVersionUID = 1L;

    /**
     * @param flag    the flag that names the directory ("--save-dir")
     * @param dir     the directory
     * @param problem who cannot see what ("process 0 (host a) cannot see rank-00002.bin, which process 1 (...) wrote")
     */
    public SaveDirNotSharedException(String flag, Path dir, String problem) {
        super(flag + " " + dir + " must be a directory every process sees (a filesystem shared by every node): "
                + problem + "; give every process the same shared " + flag);
    }
}
