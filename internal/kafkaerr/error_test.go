package kafkaerr

import (
	"errors"
	"fmt"
	"testing"
)

func TestForCode(t *testing.T) {
	if ForCode(0) != nil {
		t.Fatal("code 0 must be nil")
	}
	err := fmt.Errorf("produce to t[1]: %w", ForCode(NotLeaderForPartition))
	if !errors.Is(err, ForCode(NotLeaderForPartition)) {
		t.Fatal("wrapped error does not match its code")
	}
	if errors.Is(err, ForCode(UnknownTopicOrPartition)) {
		t.Fatal("different codes must not match")
	}
	var ke *Error
	if !errors.As(err, &ke) || !ke.Retriable || ke.Name != "NOT_LEADER_FOR_PARTITION" {
		t.Fatalf("bad typed error %+v", ke)
	}
	if Typed(SaslAuthenticationFailed).Retriable {
		t.Fatal("auth failure must not be retriable")
	}
	unknown := Typed(32000)
	if unknown.Name != "UNKNOWN_ERROR_CODE_32000" || unknown.Retriable {
		t.Fatalf("unexpected unknown code mapping %+v", unknown)
	}
}

// Every *_AUTHORIZATION_FAILED code, wrapped, matches ErrAuthorization as
// well as its own code; no other code does.
func TestAuthorizationClass(t *testing.T) {
	auth := map[int16]bool{TopicAuthorizationFailed: true, GroupAuthorizationFailed: true, ClusterAuthorizationFailed: true,
		TransactionalIDAuthorizationFailed: true, DelegationTokenAuthorizationFailed: true}
	for code, en := range table {
		err := fmt.Errorf("InitProducerId: %w", ForCode(code))
		if got := errors.Is(err, ErrAuthorization); got != auth[code] {
			t.Errorf("%s (%d): errors.Is(err, ErrAuthorization) = %v", en.name, code, got)
		}
		if !errors.Is(err, ForCode(code)) {
			t.Errorf("%s (%d) no longer matches its own code", en.name, code)
		}
	}
	for code := range auth {
		if _, ok := table[code]; !ok {
			t.Errorf("code %d is not in the table", code)
		}
	}
	if errors.Is(ErrAuthorization, ForCode(ClusterAuthorizationFailed)) {
		t.Error("the class must not match one code")
	}
}
