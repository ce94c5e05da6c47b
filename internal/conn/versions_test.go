package conn

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPickByTopicID: a FetchByID is picked under the by-id caps, any
// other request (a plain Fetch too, even one whose topics carry ids, or
// one naming nothing) under the caps; the broker's maximum bounds both.
func TestPickByTopicID(t *testing.T) {
	id := [16]byte{1}
	byID := func(r *kmsg.FetchRequest) kmsg.Request { return FetchByID{r} }
	fetch := func(topics, forgotten [][16]byte) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		for _, x := range topics {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "t", x
			req.Topics = append(req.Topics, rt)
		}
		for _, x := range forgotten {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = "t", x
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
		return req
	}
	broker := func(fetchMax int16) *kmsg.ApiVersionsResponse {
		resp := kmsg.NewPtrApiVersionsResponse()
		for _, k := range []struct{ key, max int16 }{{0, 13}, {1, fetchMax}} {
			ak := kmsg.NewApiVersionsResponseApiKey()
			ak.ApiKey, ak.MinVersion, ak.MaxVersion = k.key, 0, k.max
			resp.ApiKeys = append(resp.ApiKeys, ak)
		}
		return resp
	}
	caps := map[int16]int16{0: 12, 1: 12}
	idCaps := map[int16]int16{0: 12}
	for _, tc := range []struct {
		name     string
		req      kmsg.Request
		fetchMax int16
		idCaps   map[int16]int16
		want     int16
		byID     bool
	}{
		{"fetch by id", byID(fetch([][16]byte{id, id}, [][16]byte{id})), 18, idCaps, 18, true},
		{"fetch by id, older broker", byID(fetch([][16]byte{id}, nil)), 16, idCaps, 16, true},
		{"fetch by id, broker before ids", byID(fetch([][16]byte{id}, nil)), 12, idCaps, 12, true},
		{"fetch by id, user cap", byID(fetch([][16]byte{id}, nil)), 18, map[int16]int16{1: 15}, 15, true},
		{"fetch by id naming nothing (a by-id session's idle fetch or close)", byID(fetch(nil, nil)), 18, idCaps, 18, true},
		{"fetch by name naming nothing (a by-name session's idle fetch or close)", fetch(nil, nil), 18, idCaps, 12, false},
		{"plain fetch whose topics carry ids", fetch([][16]byte{id}, nil), 18, idCaps, 12, false},
		{"produce", kmsg.NewPtrProduceRequest(), 18, idCaps, 12, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ByTopicID(tc.req); got != tc.byID {
				t.Errorf("ByTopicID = %v, want %v", got, tc.byID)
			}
			v := newVersions(broker(tc.fetchMax), caps, tc.idCaps)
			got, err := v.Pick(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("picked v%d, want v%d", got, tc.want)
			}
		})
	}
}
