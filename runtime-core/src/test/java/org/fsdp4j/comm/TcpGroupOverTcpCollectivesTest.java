// Every case of TcpGroupCollectivesTest again with shared memory refused, so that every byte
// between the processes goes over TCP on localhost, as between machines: both paths of PeerLinks
// stay tested on one host.
package org.fsdp4j.comm;

class TcpGroupOverTcpCollectivesTest extends TcpGroupCollectivesTest {

    @Override
    boolean sharedMemory() {
        return false;
    }
}
