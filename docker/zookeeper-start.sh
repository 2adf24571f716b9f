#!/bin/sh
# Start Debian's ZooKeeper with a config from docker/conf/.
#   zookeeper-start.sh CONFIG [MYID]
# With MYID (an ensemble member) the id is written to <dataDir>/myid and QuorumPeerMain runs;
# without it, a standalone ZooKeeperServerMain.
set -eu
config="$1"
myid="${2:-}"
data_dir=$(sed -n 's/^dataDir=//p' "$config")
mkdir -p "$data_dir"
cp=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar
if [ -n "$myid" ]; then
    echo "$myid" > "$data_dir/myid"
    exec java -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$config"
fi
exec java -cp "$cp" org.apache.zookeeper.server.ZooKeeperServerMain "$config"
