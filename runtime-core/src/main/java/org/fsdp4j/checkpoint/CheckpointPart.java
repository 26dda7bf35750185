// What one process wrote of a checkpoint: its ranks' files with their sizes and checksums, the
// entries that say which element ranges those files hold, and the parameters its ranks' shards
// touch. A run in one process has one part; a run over several has one per process, and process
// 0 merges them into the one index.json (CheckpointWriter.commit), so a checkpoint looks the same
// however many processes wrote it. Over several processes a part travels as a small JSON file in
// the shared partial directory (process-NNNNN.json, removed before the commit's rename), so its
// size is not bounded by the store's values; only its size and checksum go through the store.
package org.fsdp4j.checkpoint;

import java.util.List;

/**
 * @param process the process that wrote it (0 in a run of one process)
 * @param params  every parameter its ranks' shards touch, with its shape, in the order the ranks meet them
 * @param files   its rank files, in rank order
 * @param entries where its files hold which elements, in file order
 */
public record CheckpointPart(int process, List<CheckpointIndex.Param> params, List<CheckpointIndex.RankFile> files,
                             List<CheckpointIndex.Entry> entries) {

    public CheckpointPart {
        params = List.copyOf(params);
        files = List.copyOf(files);
        entries = List.copyOf(entries);
    }

    /** The name of process {@code process}'s part file in the partial directory. */
    static String fileName(int process) {
        return String.format("process-%05d.json", process);
    }
}
