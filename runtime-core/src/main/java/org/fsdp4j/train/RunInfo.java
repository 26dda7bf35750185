// What a run resolved before its first step, for the header a person reads once: the actual
// device and backend, the parameter count, the data and its loss floor.
package org.fsdp4j.train;

import java.util.Optional;
import java.util.OptionalDouble;
import org.fsdp4j.api.ShardingInfo;

/**
 * @param config        the configuration as validated
 * @param device        the resolved device ("cpu", "cuda:0")
 * @param backendName   the backend in words
 * @param parameters    number of model parameters
 * @param worldSize     ranks taking part
 * @param data          the data source in words
 * @param lossFloorNats the data's entropy rate, when known
 * @param gatherSchedule how the engine schedules gathered params and unsharded gradients; empty where the
 *                       engine has none or the run does not {@linkplain TrainConfig#reportsSharding() report its sharding}
 */
public record RunInfo(TrainConfig config, String device, String backendName, long parameters, int worldSize,
                      String data, OptionalDouble lossFloorNats, Optional<ShardingInfo.GatherSchedule> gatherSchedule) {
}
