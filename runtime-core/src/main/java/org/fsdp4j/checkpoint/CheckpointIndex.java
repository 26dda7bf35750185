// A checkpoint's index.json: what the checkpoint holds and where, written last, after every rank
// file is complete and synced. Parameters are keyed by name and element range, never by flat
// offsets (which depend on the padding and the shard count), so a checkpoint loads at any world
// size, strategy or shard-group size. Keys are snake_case (as JsonFiles writes records).
//
//   DIR/step-00000020/index.json          this record
//   DIR/step-00000020/rank-00000.bin      rank 0's entries, fp32 little-endian, back to back
//   ...                                   one file per rank that holds a distinct shard (replicas write none)
package org.fsdp4j.checkpoint;

import java.util.List;
import org.fsdp4j.model.HfModelConfig;

/**
 * @param format        always "fsdp4j-checkpoint"
 * @param formatVersion {@link #FORMAT_VERSION}; a reader refuses another
 * @param step          optimizer steps completed when saved: the run continues at step + 1
 * @param model         the model's family and shape, as its Hugging Face config.json spells them (model_type gpt2 or llama)
 * @param preset        the preset the run named ("tiny", "custom", ...)
 * @param strategy      the strategy it was saved under (full_shard, ...)
 * @param worldSize     ranks N when saved
 * @param shardSize     ranks each unit's flat parameter was split over (N, S for hybrid_shard, 1 for no_shard)
 * @param paramDtype    dtype the run gathered and computed in; the saved masters are fp32 regardless
 * @param reduceDtype   dtype gradients were reduced in
 * @param stateDtype    dtype of every saved value ("fp32")
 * @param buffers       the buffer names each parameter has: "param" (fp32 master), "exp_avg", "exp_avg_sq"
 * @param optimizer     the optimizer's hyperparameters and step count
 * @param lossScaler    the loss scaler's scale and good-step count (fp16; scale 1 otherwise)
 * @param data          the data position: batches are a pure function of (seed, step)
 * @param losses        the loss of every step so far (null where it was not finite)
 * @param params        every parameter's name and shape, in model order
 * @param files         every rank file with its size and checksum
 * @param entries       which file holds which element range of which buffer of which parameter
 */
public record CheckpointIndex(String format, int formatVersion, int step, HfModelConfig model, String preset,
                              String strategy, int worldSize, int shardSize, String paramDtype, String reduceDtype,
                              String stateDtype, List<String> buffers, OptimizerState optimizer,
                              LossScalerState lossScaler, DataPosition data, float[] losses, List<Param> params,
                              List<RankFile> files, List<Entry> entries) {

    public static final String FORMAT = "fsdp4j-checkpoint";
    public static final int FORMAT_VERSION = 1;
    public static final String FILE_NAME = "index.json";

    /** AdamW's hyperparameters (lr is the schedule's peak) and the updates applied so far. */
    public record OptimizerState(String name, int step, float lr, float beta1, float beta2, float eps, float weightDecay) {
    }

    public record LossScalerState(float scale, int goodSteps) {
    }

    /**
     * @param seed        the batch sampler's seed
     * @param batchSize   global batch B
     * @param seqLen      tokens per sequence T
     * @param nextStep    the step whose batch comes next
     * @param plannedSteps the run's --steps (the learning-rate schedule's length)
     * @param tokenPosition where the next batch starts in a token stream read in order (train --data on
     *                    shards or a tokenized file); null for the random windows of the byte-level data,
     *                    and in checkpoints written before streams were read in order
     */
    public record DataPosition(long seed, int batchSize, int seqLen, int nextStep, int plannedSteps, Long tokenPosition) {

        /** A position of the byte-level data, whose batches are a function of (seed, step) alone. */
        public DataPosition(long seed, int batchSize, int seqLen, int nextStep, int plannedSteps) {
            this(seed, batchSize, seqLen, nextStep, plannedSteps, null);
        }
    }

    public record Param(String name, long[] shape) {
        public long numel() {
            long n = 1;
            for (long d : shape) {
                n *= d;
            }
            return n;
        }
    }

    /**
     * @param file       name within the checkpoint directory
     * @param rank       the world rank that wrote it
     * @param shardIndex the shard of every unit it holds
     * @param bytes      its size
     * @param crc32c     CRC-32C of its bytes, 8 hex digits
     */
    public record RankFile(String file, int rank, int shardIndex, long bytes, String crc32c) {
    }

    /**
     * Elements [start, end) of {@code param}'s {@code buffer} (row-major) lie at byte
     * {@code offset} of {@code file}, fp32 little-endian.
     */
    public record Entry(String param, String buffer, long start, long end, String file, long offset) {
    }
}
