// The per-rank figures of summary.json (memory per rank and category, offloaded memory, comm
// bytes, the memory check's measurements) for the ranks one process holds, and the two totals
// over ranks (host syncs, promoted copies). At the end of a run over several processes every
// process sends its own and they are joined in process order, which is global rank order
// (process p holds ranks pK .. pK + K − 1), so the summary reads as one process's run of N ranks.
package org.fsdp4j.train;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.fsdp4j.api.MemoryCategory;

/**
 * @param firstRank                  the global rank of every array's first element
 * @param persistentBytesPerRank     params + grads + optimizer bytes live now
 * @param peakBytesPerRank           the highest live bytes over the run
 * @param peakBytesByCategory        per category label, each rank's highest live bytes
 * @param bytesAtPeakByCategory      per category label, what was live at each rank's highest peak
 * @param commBytesPerRank           bytes each rank sent in the last step
 * @param hostPersistentBytesPerRank offloaded state per rank; null without offload
 * @param hostPeakBytesPerRank       the highest host bytes per rank; null without offload
 * @param measuredPersistentBytesPerRank the memory check's persistent bytes after the first step; null before a step
 * @param measuredPeakBytesPerRank   the memory check's first-step peak; null before a step
 * @param hostSyncsPerStep           the most times any of the ranks' hosts waited for its device in one step
 * @param promotedCopies             GEMMs with mixed operand dtypes, over the run and the ranks
 */
record RankFigures(int firstRank, long[] persistentBytesPerRank, long[] peakBytesPerRank,
                   Map<String, long[]> peakBytesByCategory, Map<String, long[]> bytesAtPeakByCategory,
                   long[] commBytesPerRank, long[] hostPersistentBytesPerRank, long[] hostPeakBytesPerRank,
                   long[] measuredPersistentBytesPerRank, long[] measuredPeakBytesPerRank, long hostSyncsPerStep,
                   long promotedCopies) {

    /** How many ranks the arrays hold. */
    int ranks() {
        return persistentBytesPerRank.length;
    }

    /** The global ranks the arrays hold, in order. */
    int[] globalRanks() {
        return java.util.stream.IntStream.range(firstRank, firstRank + ranks()).toArray();
    }

    /**
     * Every process's figures, given in process order, as one: arrays joined, the host syncs'
     * maximum, the promoted copies' sum. An array some process lacks (offload, a memory check)
     * is absent from the whole.
     */
    static RankFigures join(List<RankFigures> byProcess) {
        int n = byProcess.size();
        long syncs = 0;
        long promoted = 0;
        for (RankFigures f : byProcess) {
            syncs = Math.max(syncs, f.hostSyncsPerStep);
            promoted += f.promotedCopies;
        }
        return new RankFigures(byProcess.get(0).firstRank, joined(byProcess, RankFigures::persistentBytesPerRank),
                joined(byProcess, RankFigures::peakBytesPerRank), joinedByCategory(byProcess, RankFigures::peakBytesByCategory),
                joinedByCategory(byProcess, RankFigures::bytesAtPeakByCategory), joined(byProcess, RankFigures::commBytesPerRank),
                joined(byProcess, RankFigures::hostPersistentBytesPerRank), joined(byProcess, RankFigures::hostPeakBytesPerRank),
                joined(byProcess, RankFigures::measuredPersistentBytesPerRank),
                joined(byProcess, RankFigures::measuredPeakBytesPerRank), syncs, promoted);
    }

    private static long[] joined(List<RankFigures> byProcess, java.util.function.Function<RankFigures, long[]> array) {
        long[][] parts = new long[byProcess.size()][];
        for (int p = 0; p < parts.length; p++) {
            parts[p] = array.apply(byProcess.get(p));
            if (parts[p] == null) {
                return null;
            }
        }
        return StepFigures.concat(parts);
    }

    private static Map<String, long[]> joinedByCategory(List<RankFigures> byProcess,
                                                        java.util.function.Function<RankFigures, Map<String, long[]>> map) {
        Map<String, long[]> out = new LinkedHashMap<>();
        for (String label : map.apply(byProcess.get(0)).keySet()) {
            out.put(label, joined(byProcess, f -> map.apply(f).get(label)));
        }
        return out;
    }

    /** What a process sends at the end of the run: a few hundred bytes for a few ranks. */
    byte[] encode() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(1024);
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(firstRank);
            StepFigures.writeArray(out, persistentBytesPerRank);
            StepFigures.writeArray(out, peakBytesPerRank);
            for (MemoryCategory c : MemoryCategory.values()) {
                StepFigures.writeArray(out, peakBytesByCategory.get(c.label()));
                StepFigures.writeArray(out, bytesAtPeakByCategory.get(c.label()));
            }
            StepFigures.writeArray(out, commBytesPerRank);
            StepFigures.writeArray(out, hostPersistentBytesPerRank);
            StepFigures.writeArray(out, hostPeakBytesPerRank);
            StepFigures.writeArray(out, measuredPersistentBytesPerRank);
            StepFigures.writeArray(out, measuredPeakBytesPerRank);
            out.writeLong(hostSyncsPerStep);
            out.writeLong(promotedCopies);
        } catch (IOException e) {
            throw new UncheckedIOException(e);      // a byte array does not fail
        }
        return bytes.toByteArray();
    }

    static RankFigures decode(byte[] encoded) {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(encoded))) {
            int first = in.readInt();
            long[] persistent = StepFigures.readArray(in);
            long[] peak = StepFigures.readArray(in);
            Map<String, long[]> byCategory = new LinkedHashMap<>();
            Map<String, long[]> atPeak = new LinkedHashMap<>();
            for (MemoryCategory c : MemoryCategory.values()) {
                byCategory.put(c.label(), StepFigures.readArray(in));
                atPeak.put(c.label(), StepFigures.readArray(in));
            }
            return new RankFigures(first, persistent, peak, byCategory, atPeak, StepFigures.readArray(in),
                    StepFigures.readArray(in), StepFigures.readArray(in), StepFigures.readArray(in),
                    StepFigures.readArray(in), in.readLong(), in.readLong());
        } catch (IOException e) {
            throw new IllegalStateException("a process's figures do not decode (" + encoded.length + " bytes)", e);
        }
    }
}
