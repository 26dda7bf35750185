// The intersection of one original parameter with one shard of a flat parameter: which
// elements of the parameter (paramOffset..+numel, row-major) sit where in the shard
// (shardOffset..+numel). The optimizer's per-parameter segments (weight decay or not) and the
// sharded initialisation are both built from these.
package org.fsdp4j.fsdp;

import org.fsdp4j.api.ParamSpec;

public record ShardSlice(int paramIndex, ParamSpec spec, long paramOffset, long shardOffset, long numel) {

    public ShardSlice {
        if (paramOffset < 0 || shardOffset < 0 || numel <= 0 || paramOffset + numel > spec.numel()) {
            throw new IllegalArgumentException("slice [" + paramOffset + ", " + (paramOffset + numel) + ") of "
                    + spec + " at shard offset " + shardOffset + " is out of range");
        }
    }
}
