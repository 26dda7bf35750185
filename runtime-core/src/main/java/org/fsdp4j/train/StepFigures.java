// What one process's ranks measured in a step, reduced over its ranks to the few numbers a step
// line and metrics.jsonl print: in a run over several processes each process sends these with
// the step's stop vote and process 0 merges them into the whole run's (ProcessGroup.agreeToStop),
// so its reports describe all N ranks, not its own K. The first step also carries the per-rank
// persistent and peak bytes that the memory check ("planner vs measured") compares.
package org.fsdp4j.train;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.fsdp4j.api.MemoryCategory;

/**
 * @param liveBytes       bytes live after the step, the largest over the ranks
 * @param peakBytes       the step's peak bytes, the largest over the ranks
 * @param peakSplit       the live bytes per category at the instant of that rank's peak
 * @param commBytes       bytes sent during the step, the largest over the ranks
 * @param hostSyncs       times a rank's host waited for its device, the most over the ranks
 * @param promotedCopies  GEMMs whose operand dtypes differed, summed over the ranks
 * @param persistentBytesPerRank params + grads + optimizer bytes after the step, per rank; null but on the first step
 * @param peakBytesPerRank the step's peak, per rank; null but on the first step
 */
record StepFigures(long liveBytes, long peakBytes, Map<MemoryCategory, Long> peakSplit, long commBytes, long hostSyncs,
                   long promotedCopies, long[] persistentBytesPerRank, long[] peakBytesPerRank) {

    /**
     * The whole run's figures from every process's, in process order (so the per-rank arrays
     * come out in global rank order): maxima over the processes, the peak split of the first
     * process with the largest peak (as one process takes its first rank with it), copies summed.
     */
    static StepFigures merge(List<StepFigures> byProcess) {
        StepFigures first = byProcess.get(0);
        long live = 0;
        long comm = 0;
        long syncs = 0;
        long promoted = 0;
        StepFigures peakOf = first;
        boolean perRank = first.persistentBytesPerRank != null;
        long[][] persistent = new long[byProcess.size()][];
        long[][] peaks = new long[byProcess.size()][];
        for (int p = 0; p < byProcess.size(); p++) {
            StepFigures f = byProcess.get(p);
            live = Math.max(live, f.liveBytes);
            comm = Math.max(comm, f.commBytes);
            syncs = Math.max(syncs, f.hostSyncs);
            promoted += f.promotedCopies;
            if (f.peakBytes > peakOf.peakBytes) {
                peakOf = f;
            }
            perRank &= f.persistentBytesPerRank != null;
            persistent[p] = f.persistentBytesPerRank;
            peaks[p] = f.peakBytesPerRank;
        }
        return new StepFigures(live, peakOf.peakBytes, peakOf.peakSplit, comm, syncs, promoted,
                perRank ? concat(persistent) : null, perRank ? concat(peaks) : null);
    }

    static long[] concat(long[][] parts) {
        int n = 0;
        for (long[] a : parts) {
            n += a.length;
        }
        long[] out = new long[n];
        int at = 0;
        for (long[] a : parts) {
            System.arraycopy(a, 0, out, at, a.length);
            at += a.length;
        }
        return out;
    }

    /** A few dozen bytes: what a process sends with its vote. */
    byte[] encode() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(128);
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeLong(liveBytes);
            out.writeLong(peakBytes);
            out.writeLong(commBytes);
            out.writeLong(hostSyncs);
            out.writeLong(promotedCopies);
            for (MemoryCategory c : MemoryCategory.values()) {
                out.writeLong(peakSplit.getOrDefault(c, 0L));
            }
            writeArray(out, persistentBytesPerRank);
            writeArray(out, peakBytesPerRank);
        } catch (IOException e) {
            throw new UncheckedIOException(e);      // a byte array does not fail
        }
        return bytes.toByteArray();
    }

    static StepFigures decode(byte[] encoded) {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(encoded))) {
            long live = in.readLong();
            long peak = in.readLong();
            long comm = in.readLong();
            long syncs = in.readLong();
            long promoted = in.readLong();
            Map<MemoryCategory, Long> split = new EnumMap<>(MemoryCategory.class);
            for (MemoryCategory c : MemoryCategory.values()) {
                split.put(c, in.readLong());
            }
            return new StepFigures(live, peak, split, comm, syncs, promoted, readArray(in), readArray(in));
        } catch (IOException e) {
            throw new IllegalStateException("a process's step figures do not decode (" + encoded.length + " bytes)", e);
        }
    }

    /** A length (−1 for null) and the longs. */
    static void writeArray(DataOutputStream out, long[] values) throws IOException {
        out.writeInt(values == null ? -1 : values.length);
        if (values != null) {
            for (long v : values) {
                out.writeLong(v);
            }
        }
    }

    static long[] readArray(DataInputStream in) throws IOException {
        int n = in.readInt();
        if (n < 0) {
            return null;
        }
        long[] values = new long[n];
        for (int i = 0; i < n; i++) {
            values[i] = in.readLong();
        }
        return values;
    }
}
