// What the API's entry points (Fsdp, Processes, SafetensorsWeights) ask of the engine. The engine
// provides it through ServiceLoader (runtime-core's org.fsdp4j.runtime.EngineRuntime), so this
// package, the model contract and the facade alike, imports nothing of the engine: the engine
// depends on the API, never the other way round.
package org.fsdp4j.api;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * The engine behind {@link Fsdp}, {@link Processes} and {@link SafetensorsWeights}, found with
 * {@link ServiceLoader}; runtime-core provides it. A program never calls it: it uses those classes.
 */
public interface FsdpRuntime {

    /**
     * What {@link Fsdp#shard(ModelFactory, FsdpOptions)} and
     * {@link Fsdp#shard(ModelFactory, FsdpOptions, Processes)} do.
     *
     * @param factory   builds one rank's model
     * @param options   how to shard and train
     * @param processes this process's membership in a run over several, or null for one process
     * @return the sharded model (this process's share of it)
     */
    ShardedModel shard(ModelFactory factory, FsdpOptions options, Processes processes);

    /**
     * What {@link Processes#fromEnvironment} does.
     *
     * @param settings what every process must agree on
     * @param timeout  how long to wait for the other processes
     * @return the joined run, or empty when the environment describes none
     */
    Optional<Processes.Membership> join(Map<String, String> settings, Duration timeout);

    /**
     * What {@link SafetensorsWeights#open(Path, Function, Predicate)} does.
     *
     * @param location   the files
     * @param tensorName the tensor of each parameter
     * @param ignorable  the tensors no parameter needs to take
     * @return the opened weights
     */
    SafetensorsWeights openSafetensors(Path location, Function<String, String> tensorName, Predicate<String> ignorable);

    /**
     * The runtime on the class path.
     *
     * @return it
     * @throws IllegalStateException when there is none (runtime-core is missing)
     */
    static FsdpRuntime get() {
        return Holder.RUNTIME;
    }

    /** Looks the runtime up once, when first asked. */
    final class Holder {
        private static final FsdpRuntime RUNTIME = ServiceLoader.load(FsdpRuntime.class, FsdpRuntime.class.getClassLoader())
                .findFirst().orElseThrow(() -> new IllegalStateException("no fsdp4j runtime on the class path: add"
                        + " the runtime-core artifact (it provides org.fsdp4j.api.FsdpRuntime)"));

        private Holder() {
        }
    }
}
