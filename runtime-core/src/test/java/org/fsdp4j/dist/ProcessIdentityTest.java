// Who a process is, from each source the issue names: the command line first, then torchrun's
// variables (also what Kubernetes training operators set), Slurm's (with the master taken from a
// compressed node list, no scontrol) and Open MPI's; plus the errors a user meets. The job's
// token and the bind settings come from the environment whatever the source, and a run needs a
// token exactly when its master is not this host's loopback.
package org.fsdp4j.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class ProcessIdentityTest {

    private static ProcessIdentity resolve(Map<String, String> env) {
        return ProcessIdentity.resolve(ProcessIdentity.Explicit.NONE, env).orElseThrow();
    }

    @Test
    void nothingSaysSeveralProcesses() {
        assertEquals(Optional.empty(), ProcessIdentity.resolve(ProcessIdentity.Explicit.NONE, Map.of("HOME", "/root")));
    }

    @Test
    void torchrunsVariables() {
        ProcessIdentity id = resolve(Map.of("RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4",
                "GROUP_RANK", "1", "MASTER_ADDR", "node0", "MASTER_PORT", "1234"));
        assertEquals(new ProcessIdentity(5, 8, 1, 4, 1, "node0", 1234, id.source()), id);
        assertTrue(id.source().startsWith("torchrun"));
    }

    @Test
    void kubernetesSetsRankAndWorldSizePerPod() {
        ProcessIdentity id = resolve(Map.of("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "job-master-0"));
        assertEquals(0, id.localRank());
        assertEquals(1, id.localCount());
        assertEquals(1, id.nodeRank());
        assertEquals(ProcessIdentity.DEFAULT_MASTER_PORT, id.masterPort());
    }

    @Test
    void slurmsVariablesWithACompressedNodeList() {
        ProcessIdentity id = resolve(Map.of("SLURM_PROCID", "9", "SLURM_NTASKS", "16", "SLURM_LOCALID", "1",
                "SLURM_NODEID", "4", "SLURM_TASKS_PER_NODE", "4(x3),2(x2)", "SLURM_JOB_NODELIST", "gpu[01-04,07]",
                "SLURM_JOB_ID", "123456"));
        assertEquals(9, id.rank());
        assertEquals(16, id.count());
        assertEquals(1, id.localRank());
        assertEquals(2, id.localCount(), "node 4 is the second of the nodes with 2 tasks");
        assertEquals(4, id.nodeRank());
        assertEquals("gpu01", id.masterAddr());
        assertEquals(ProcessIdentity.DEFAULT_MASTER_PORT + 3456, id.masterPort(), "each job its own port");
    }

    @Test
    void slurmOnOneNodeByHand() {
        ProcessIdentity id = resolve(Map.of("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_LOCALID", "1",
                "SLURM_NTASKS_PER_NODE", "2", "SLURM_JOB_NODELIST", "localhost"));
        assertEquals(new ProcessIdentity(1, 2, 1, 2, 0, "localhost", ProcessIdentity.DEFAULT_MASTER_PORT, id.source()), id);
    }

    @Test
    void openMpisVariables() {
        ProcessIdentity id = resolve(Map.of("OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4",
                "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "2", "MASTER_ADDR", "10.0.0.1"));
        assertEquals(new ProcessIdentity(3, 4, 1, 2, 1, "10.0.0.1", ProcessIdentity.DEFAULT_MASTER_PORT, id.source()), id);
    }

    @Test
    void theCommandLineComesFirstThenTorchrunThenSlurm() {
        Map<String, String> env = Map.of("RANK", "1", "WORLD_SIZE", "2", "SLURM_PROCID", "7", "SLURM_NTASKS", "8",
                "MASTER_ADDR", "from-env");
        assertEquals(1, resolve(env).rank(), "torchrun's variables before Slurm's");
        ProcessIdentity cli = ProcessIdentity.resolve(new ProcessIdentity.Explicit(0, 3, null, null, null, "from-cli", 4000),
                env).orElseThrow();
        assertEquals(0, cli.rank());
        assertEquals(3, cli.count());
        assertEquals("from-cli", cli.masterAddr());
        assertEquals(4000, cli.masterPort());
        assertEquals("the command line", cli.source());
    }

    @Test
    void mistakesAreOneLineThatNamesTheVariables() {
        assertMessage("WORLD_SIZE is set but RANK is not", Map.of("WORLD_SIZE", "2"));
        assertMessage("RANK='x' is not a non-negative integer", Map.of("RANK", "x", "WORLD_SIZE", "2"));
        assertMessage("process rank 2 is outside a run of 2 processes", Map.of("RANK", "2", "WORLD_SIZE", "2"));
        assertMessage("need the master's address", Map.of("RANK", "0", "WORLD_SIZE", "4", "LOCAL_WORLD_SIZE", "2"));
        assertMessage("is not a Slurm host list", Map.of("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_JOB_NODELIST", "gpu[01-"));
    }

    private static void assertMessage(String expected, Map<String, String> env) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> resolve(env));
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }

    @Test
    void firstHostsOfSlurmHostLists() {
        assertEquals("gpu01", SlurmNodeList.firstHost("gpu[01-04,07]"));
        assertEquals("node7", SlurmNodeList.firstHost("node7"));
        assertEquals("a1-ib", SlurmNodeList.firstHost("a[1-2]-ib,b3"));
        assertEquals("rack1-node001", SlurmNodeList.firstHost("rack[1-2]-node[001-004]"));
        assertEquals("x", SlurmNodeList.firstHost("x,y[1-3]"));
        for (String bad : new String[] {"", "[1-2]", "gpu[a-b]", "gpu[1-2", "gpu1]", "gpu[1[2]]"}) {
            assertThrows(IllegalArgumentException.class, () -> SlurmNodeList.firstHost(bad), bad);
        }
    }

    @Test
    void slurmsTasksPerNode() {
        assertEquals(2, ProcessIdentity.tasksOnNode("2(x3),1", 2));
        assertEquals(1, ProcessIdentity.tasksOnNode("2(x3),1", 3));
        assertEquals(8, ProcessIdentity.tasksOnNode("8", 0));
        assertThrows(IllegalArgumentException.class, () -> ProcessIdentity.tasksOnNode("2(x3)", 3));
    }

    @Test
    void theJobsAccessComesFromTheEnvironmentWhateverTheSource() {
        String secret = "0123456789abcdef0123456789abcdef0123456789abcdef";
        ProcessIdentity id = resolve(Map.of("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_JOB_NODELIST", "node[01-02]",
                "FSDP4J_JOB_TOKEN", secret, "FSDP4J_STORE_BIND", "0.0.0.0", "FSDP4J_PEER_BIND", " 10.0.0.2 "));
        assertTrue(!id.access().token().isNone());
        assertEquals("0.0.0.0", id.access().storeBind());
        assertEquals("10.0.0.2", id.access().peerBind());
        assertTrue(!id.toString().contains(secret) && !id.access().toString().contains(secret), id + " " + id.access());
        assertEquals(JobAccess.NONE, resolve(Map.of("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1")).access());
    }

    @Test
    void aTokenIsNeededExactlyWhenTheMasterIsNotThisHostsLoopback() {
        // by hand on one host: torchrun's variables leave LOCAL_WORLD_SIZE at 1, the loopback master says it all
        for (String master : new String[] {"127.0.0.1", "localhost", "127.0.0.2"}) {
            ProcessIdentity id = resolve(Map.of("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", master));
            assertTrue(!id.maySpanHosts(), master);
            id.requireTokenAcrossHosts();
        }
        ProcessIdentity slurm = resolve(Map.of("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_JOB_NODELIST",
                "node[01-02]"));
        assertTrue(slurm.maySpanHosts(), "a node name that does not resolve here counts as another host");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, slurm::requireTokenAcrossHosts);
        assertTrue(e.getMessage().startsWith("the master address node01 is not this host's loopback"), e.getMessage());
        slurm.withAccess(JobAccess.NONE.withToken(org.fsdp4j.comm.JobToken.generate())).requireTokenAcrossHosts();
        assertThrows(IllegalArgumentException.class, () -> resolve(Map.of("RANK", "1", "WORLD_SIZE", "2",
                "MASTER_ADDR", "10.0.0.1")).requireTokenAcrossHosts());
    }
}
