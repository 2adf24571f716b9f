"""One module per Kafka API; ``ALL_HANDLERS`` is the dispatch table's content."""

from broker.server.handlers import (
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_configs,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
)

ALL_HANDLERS = [
    module.HANDLER
    for module in (
        produce,
        fetch,
        list_offsets,
        metadata,
        api_versions,
        create_topics,
        delete_topics,
        init_producer_id,
        describe_configs,
        find_coordinator,
        offset_for_leader_epoch,
        create_partitions,
        join_group,
        sync_group,
        heartbeat,
        leave_group,
        offset_commit,
        offset_fetch,
        list_groups,
        describe_groups,
    )
]
