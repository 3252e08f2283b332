"""Tests of runtime.core.config.JobConfig: validation names the bad option, rounds split the records,
and a config crosses host boundaries through the codec unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.core.codec import decode, encode
from runtime.core.config import ConfigError, JobConfig, Schedule
from runtime.protocols import PROTOCOLS

KNOWN = list(PROTOCOLS)


def test_defaults_are_valid():
    cfg = JobConfig()
    assert cfg.validate(KNOWN) is cfg


@pytest.mark.parametrize(
    "option",
    [
        "writers",
        "checkpoints",
        "partitions",
        "source_batch_rows",
        "bucket_flush_rows",
        "task_buffer_rows",
        "input_queue_batches",
    ],
)
def test_a_count_below_one_is_refused_naming_the_option(option):
    flag = "--" + option.replace("_", "-")
    with pytest.raises(ConfigError, match=f"{flag} must be at least 1, got 0"):
        JobConfig(**{option: 0}).validate()


def test_zero_writers_is_refused():
    with pytest.raises(ConfigError, match="--writers") as exc:
        JobConfig(writers=0).validate(KNOWN)
    assert "got 0" in str(exc.value)


def test_fewer_buckets_than_writers_is_refused_naming_both():
    with pytest.raises(ConfigError, match="--buckets 3 is less than --writers 4"):
        JobConfig(writers=4, buckets=3).validate()


def test_default_buckets_are_two_per_writer_and_valid():
    cfg = JobConfig(writers=3, buckets=0).validate()
    assert cfg.num_buckets == 6
    assert JobConfig(writers=3, buckets=3).validate().num_buckets == 3


def test_unknown_protocol_is_refused_with_the_list_of_choices():
    with pytest.raises(ConfigError) as exc:
        JobConfig(protocol="carrier-pigeon").validate(KNOWN)
    text = str(exc.value)
    assert "'carrier-pigeon'" in text
    for name in KNOWN:
        assert name in text
    assert "operator-event" in KNOWN and "message-bus" in KNOWN


@pytest.mark.parametrize("name", KNOWN)
def test_every_registered_protocol_is_accepted(name):
    JobConfig(protocol=name).validate(KNOWN)


def test_schedule_rounds_of_the_wrong_length_are_refused():
    cfg = JobConfig(checkpoints=3, records=30, schedule=Schedule(rounds=[10, 20]))
    with pytest.raises(ConfigError, match="schedule.rounds has 2 entries but --checkpoints is 3"):
        cfg.validate()


def test_schedule_rounds_that_do_not_add_up_are_refused():
    cfg = JobConfig(checkpoints=3, records=30, schedule=Schedule(rounds=[10, 10, 5]))
    with pytest.raises(ConfigError, match="schedule.rounds must add up to --records"):
        cfg.validate()


def test_negative_records_are_refused():
    with pytest.raises(ConfigError, match="--records must not be negative, got -1"):
        JobConfig(records=-1).validate()


def test_zero_records_is_allowed():
    assert JobConfig(records=0).validate().rounds() == [0] * 5


@pytest.mark.parametrize("option", ["buckets", "keys"])
def test_negative_buckets_or_keys_are_refused(option):
    with pytest.raises(ConfigError, match=f"--{option}"):
        JobConfig(**{option: -2}).validate()


@pytest.mark.parametrize(
    "option,flag",
    [
        ("wait_tick_s", "--wait-tick"),
        ("checkpoint_interval_s", "--checkpoint-interval"),
        ("deadlock_threshold_s", "--deadlock-threshold"),
    ],
)
def test_non_positive_timings_are_refused_naming_the_flag(option, flag):
    with pytest.raises(ConfigError, match=f"{flag} must be a positive number of seconds"):
        JobConfig(**{option: 0.0}).validate()


def test_unknown_source_and_empty_table_name_are_refused():
    with pytest.raises(ConfigError, match="--source must be one of spark, generator, got 'kafka'"):
        JobConfig(source="kafka").validate()
    with pytest.raises(ConfigError, match="--table-name"):
        JobConfig(table_name="  ").validate()


def test_rounds_split_records_evenly_earlier_rounds_take_the_remainder():
    assert JobConfig(records=10, checkpoints=3).rounds() == [4, 3, 3]
    assert JobConfig(records=9, checkpoints=3).rounds() == [3, 3, 3]
    assert JobConfig(records=2, checkpoints=4).rounds() == [1, 1, 0, 0]


@settings(max_examples=60, deadline=None)
@given(records=st.integers(0, 10_000), checkpoints=st.integers(1, 50))
def test_rounds_always_sum_to_records_and_differ_by_at_most_one(records, checkpoints):
    rounds = JobConfig(records=records, checkpoints=checkpoints).rounds()
    assert len(rounds) == checkpoints
    assert sum(rounds) == records
    assert max(rounds) - min(rounds) <= 1


def test_explicit_schedule_rounds_are_used_as_given_and_copied():
    sched = Schedule(rounds=[0, 7, 3])
    cfg = JobConfig(records=10, checkpoints=3, schedule=sched).validate()
    r = cfg.rounds()
    assert r == [0, 7, 3]
    r.append(1)  # the caller's list is a copy
    assert cfg.rounds() == [0, 7, 3]


def test_derived_values():
    assert JobConfig(records=100, keys=0).num_keys == 50
    assert JobConfig(records=100, keys=7).num_keys == 7
    assert JobConfig(records=1, keys=0).num_keys == 1
    assert JobConfig(checkpoint_timeout_s=9.0, instant_wait_timeout_s=0.0).instant_wait_timeout == 9.0
    assert JobConfig(checkpoint_timeout_s=9.0, instant_wait_timeout_s=2.0).instant_wait_timeout == 2.0


def test_config_roundtrips_through_the_codec():
    cfg = JobConfig(
        protocol="operator-event",
        writers=3,
        checkpoints=3,
        records=30,
        buckets=6,
        wait_tick_s=0.01,
        table="/tmp/x",
        schedule=Schedule(rounds=[10, 0, 20], abort_checkpoints=[2], notify_delay_s={3: 0.5}),
    )
    back = decode(encode(cfg), JobConfig)
    assert back == cfg
    assert isinstance(back.schedule, Schedule)
    assert back.schedule.notify_delay_s == {3: 0.5}  # int keys survive
    assert back.rounds() == [10, 0, 20]
    back.validate(KNOWN)


def test_replace_returns_a_new_config():
    cfg = JobConfig()
    other = cfg.replace(writers=5)
    assert other.writers == 5 and cfg.writers == 2


def test_placement_option_is_validated():
    with pytest.raises(ConfigError, match="--placement must be"):
        JobConfig(placement="everywhere").validate()
    JobConfig(placement="strict-spread").validate()
