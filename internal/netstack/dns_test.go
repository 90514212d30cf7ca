//go:build linux

package netstack

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func query(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	b.StartQuestions()
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestAnswer(t *testing.T) {
	ok := netip.MustParseAddr("93.184.216.34")
	st := &Stack{cfg: Config{Lookup: func(_ context.Context, name string, _ bool) ([]netip.Addr, error) {
		if name == "allowed.test" {
			return []netip.Addr{ok}, nil
		}
		return nil, errors.New("refused")
	}}}
	for _, c := range []struct {
		name    string
		typ     dnsmessage.Type
		rcode   dnsmessage.RCode
		answers int
	}{
		{"allowed.test.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1},
		{"allowed.test.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, 0},
		{"allowed.test.", dnsmessage.TypeMX, dnsmessage.RCodeSuccess, 0},
		{"unlisted.test.", dnsmessage.TypeA, dnsmessage.RCodeNameError, 0},
		{"unlisted.test.", dnsmessage.TypeTXT, dnsmessage.RCodeNameError, 0},
	} {
		resp := st.answer(context.Background(), query(t, c.name, c.typ), 512)
		var m dnsmessage.Message
		if err := m.Unpack(resp); err != nil {
			t.Fatalf("%s %v: %v", c.name, c.typ, err)
		}
		if m.Header.ID != 7 || !m.Header.Response || m.Header.RCode != c.rcode || len(m.Answers) != c.answers {
			t.Errorf("%s %v: %+v, %d answers; want rcode %v, %d answers", c.name, c.typ, m.Header, len(m.Answers), c.rcode, c.answers)
		}
		if c.answers == 1 {
			if a, isA := m.Answers[0].Body.(*dnsmessage.AResource); !isA || netip.AddrFrom4(a.A) != ok {
				t.Errorf("%s: answer %v, want %s", c.name, m.Answers[0].Body, ok)
			}
		}
	}
	if got := st.names.get(ok); got != "allowed.test" {
		t.Errorf("the address given out is remembered for %q, want allowed.test", got)
	}
	if resp := st.answer(context.Background(), []byte("not dns"), 512); resp != nil {
		t.Errorf("garbage answered: %x", resp)
	}
}
