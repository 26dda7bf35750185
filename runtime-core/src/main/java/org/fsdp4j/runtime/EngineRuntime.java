// The engine behind the API's entry points (FsdpRuntime, found with ServiceLoader): Fsdp.shard
// starts this process's ranks (LocalShardedModel), Processes.fromEnvironment joins the run the
// environment describes (ProcessGroup), SafetensorsWeights.open reads the files (weights). It sits
// above the engine's packages so that the API imports none of them.
package org.fsdp4j.runtime;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import java.util.function.Predicate;
import org.fsdp4j.api.FsdpOptions;
import org.fsdp4j.api.FsdpRuntime;
import org.fsdp4j.api.ModelFactory;
import org.fsdp4j.api.Processes;
import org.fsdp4j.api.SafetensorsWeights;
import org.fsdp4j.api.ShardedModel;
import org.fsdp4j.dist.ProcessGroup;
import org.fsdp4j.dist.ProcessIdentity;
import org.fsdp4j.fsdp.LocalShardedModel;
import org.fsdp4j.weights.SafetensorsSource;

public final class EngineRuntime implements FsdpRuntime {

    /** For ServiceLoader. */
    public EngineRuntime() {
    }

    @Override
    public ShardedModel shard(ModelFactory factory, FsdpOptions options, Processes processes) {
        if (processes == null) {
            return LocalShardedModel.start(factory, options);
        }
        return LocalShardedModel.start(factory, options, groupOf(processes),
                options.worldSize() / processes.processCount() * processes.processesOnThisMachine(), line -> { });
    }

    @Override
    public Optional<Processes.Membership> join(Map<String, String> settings, Duration timeout) {
        Optional<ProcessIdentity> identity = ProcessIdentity.resolve(ProcessIdentity.Explicit.NONE, System.getenv());
        if (identity.isEmpty() || identity.get().alone()) {
            return Optional.empty();
        }
        return Optional.of(ProcessGroup.join(identity.get(), settings, timeout));
    }

    @Override
    public SafetensorsWeights openSafetensors(Path location, Function<String, String> tensorName,
                                              Predicate<String> ignorable) {
        return SafetensorsSource.open(location, tensorName, ignorable);
    }

    /** The engine's group behind {@code processes}: only a run this engine joined has one. */
    private static ProcessGroup groupOf(Processes processes) {
        if (processes.membership() instanceof ProcessGroup g) {
            return g;
        }
        throw new IllegalArgumentException(processes + " was not joined by fsdp4j's runtime: use"
                + " Processes.fromEnvironment");
    }
}
