// The 2-D mesh HYBRID_SHARD needs: world = replicate × shard, ranks laid out row-major
// (rank = replicateIndex · shardSize + shardIndex, as torch's init_device_mesh does), so a shard
// group is S consecutive ranks (one node, in practice) and a replicate group is every S-th rank.
// FULL_SHARD is the mesh 1 × N, NO_SHARD is N × 1.
package org.fsdp4j.comm;

public final class DeviceMesh implements AutoCloseable {

    private final Communicator world;
    private final Communicator shard;
    private final Communicator replicate;

    private DeviceMesh(Communicator world, Communicator shard, Communicator replicate) {
        this.world = world;
        this.shard = shard;
        this.replicate = replicate;
    }

    /**
     * Splits {@code world} into shard groups of {@code shardGroupSize} consecutive ranks and the
     * replicate groups across them. Collective: every rank of world calls it.
     */
    public static DeviceMesh create(Communicator world, int shardGroupSize) {
        checkShape(world.size(), shardGroupSize);
        int rank = world.rank();
        int replicateIndex = rank / shardGroupSize;
        int shardIndex = rank % shardGroupSize;
        Communicator shard = world.split(replicateIndex, shardIndex, "shard[" + replicateIndex + "]");
        Communicator replicate = world.split(shardIndex, replicateIndex, "replicate[" + shardIndex + "]");
        return new DeviceMesh(world, shard, replicate);
    }

    /** Fails with the message a user needs when S does not divide N (the check FsdpOptions makes too). */
    public static void checkShape(int worldSize, int shardGroupSize) {
        org.fsdp4j.api.ShardingStrategy.checkMesh(worldSize, shardGroupSize);
    }

    public Communicator world() {
        return world;
    }

    /** The ranks that together hold one copy of the parameters (mesh axis "shard"). */
    public Communicator shard() {
        return shard;
    }

    /** The ranks that hold the same shard (mesh axis "replicate"). */
    public Communicator replicate() {
        return replicate;
    }

    public int shardSize() {
        return shard.size();
    }

    public int replicateSize() {
        return replicate.size();
    }

    /** Closes the two groups it split off; world belongs to whoever created it. */
    @Override
    public void close() {
        shard.close();
        replicate.close();
    }

    @Override
    public String toString() {
        return "DeviceMesh(replicate " + replicateSize() + " × shard " + shardSize() + ")";
    }
}
