"""One module per Kafka API; ``ALL_HANDLERS`` is the dispatch table's content."""

from broker.server.handlers import (
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    find_coordinator,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
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
    )
]
