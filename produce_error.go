package riffle

import (
	"strconv"
	"strings"
)

// placedError is a record's error naming where it failed, once, at its
// start: "t[1]: …" for a record that failed in its partition, `topic "t":
// …` for one that failed before it had a partition (the producer closed,
// its transaction failed, …). The wrapped error is kept for errors.Is.
type placedError struct {
	msg string
	err error
}

func (e *placedError) Error() string { return e.msg }
func (e *placedError) Unwrap() error { return e.err }

// recordError is the error a record of topic gets for err: named by its
// partition (-1: it had none yet) exactly once. A cause that already
// names the partition elsewhere in its message (a transaction failed by
// this very partition: "riffle: producer fenced: t[1]: PRODUCER_FENCED")
// has that mention moved to the front; a record that had no partition
// gets its topic named unless the message names it already (quoted, as
// ErrUnknownTopic's does, or with a partition, as ErrInvalidPartition's
// "t[7] (topic has 2 partitions)"). An error already named so is returned as it
// is, without allocating (finishing a batch allocates nothing).
func recordError(topic string, partition int32, err error) error {
	if err == nil || topic == "" {
		return err
	}
	msg := err.Error()
	if partition < 0 {
		q := strconv.Quote(topic)
		if strings.Contains(msg, q) || namesPartitionOf(msg, topic) {
			return err
		}
		return &placedError{msg: "topic " + q + ": " + msg, err: err}
	}
	n := mentionAt(msg, 0, topic, partition)
	if n > 0 && nextMention(msg, n, topic, partition) < 0 {
		return err
	}
	var b strings.Builder
	b.WriteString(topic)
	b.WriteByte('[')
	b.WriteString(strconv.Itoa(int(partition)))
	b.WriteString("]: ")
	for from := 0; ; {
		i := nextMention(msg, from, topic, partition)
		if i < 0 {
			b.WriteString(msg[from:])
			break
		}
		b.WriteString(msg[from:i])
		from = i + mentionAt(msg, i, topic, partition)
	}
	return &placedError{msg: b.String(), err: err}
}

// nextMention returns the index of the first mention of topic[partition]
// ("t[1]: ") in msg at or after from that starts msg or follows a space
// (so that "at[1]: ", another topic's, is none), or -1.
func nextMention(msg string, from int, topic string, partition int32) int {
	for from < len(msg) {
		i := strings.Index(msg[from:], topic)
		if i < 0 {
			return -1
		}
		i += from
		if (i == 0 || msg[i-1] == ' ') && mentionAt(msg, i, topic, partition) > 0 {
			return i
		}
		from = i + 1
	}
	return -1
}

// mentionAt returns the length of "topic[partition]: " at msg[i:], 0 if
// it is not there.
func mentionAt(msg string, i int, topic string, partition int32) int {
	if !strings.HasPrefix(msg[i:], topic) {
		return 0
	}
	j := i + len(topic)
	if j >= len(msg) || msg[j] != '[' {
		return 0
	}
	j++
	k := j
	for k < len(msg) && msg[k] >= '0' && msg[k] <= '9' {
		k++
	}
	if n, err := strconv.ParseInt(msg[j:k], 10, 32); err != nil || int32(n) != partition {
		return 0
	}
	if !strings.HasPrefix(msg[k:], "]: ") {
		return 0
	}
	return k + 3 - i
}

// namesPartitionOf reports whether msg names a partition of topic
// ("t[7]"), at its start or after a space.
func namesPartitionOf(msg, topic string) bool {
	for from := 0; from < len(msg); {
		i := strings.Index(msg[from:], topic+"[")
		if i < 0 {
			return false
		}
		i += from
		j := i + len(topic) + 1
		k := j
		for k < len(msg) && msg[k] >= '0' && msg[k] <= '9' {
			k++
		}
		if (i == 0 || msg[i-1] == ' ') && k > j && k < len(msg) && msg[k] == ']' {
			return true
		}
		from = i + 1
	}
	return false
}
