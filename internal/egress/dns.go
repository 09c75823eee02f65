package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer answers sandboxes' DNS (UDP and TCP) from the Resolver, for
// allowed names only: a name the sandbox may not reach does not exist for
// it (NXDOMAIN), so clients fail at once instead of connecting and being
// reset.
type dnsServer struct {
	p   *Proxy
	udp net.PacketConn
	tcp net.Listener
}

func (p *Proxy) startDNS(ctx context.Context) (*dnsServer, error) {
	var lc net.ListenConfig
	u, err := lc.ListenPacket(ctx, "udp4", p.cfg.DNSListen.String())
	if err != nil {
		return nil, fmt.Errorf("egress dns: %w", err)
	}
	t, err := lc.Listen(ctx, "tcp4", p.cfg.DNSListen.String())
	if err != nil {
		u.Close()
		return nil, fmt.Errorf("egress dns: %w", err)
	}
	d := &dnsServer{p: p, udp: u, tcp: t}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := u.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			q := append([]byte(nil), buf[:n]...)
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				if out := d.answer(addrOf(from), q); out != nil {
					u.WriteTo(out, from)
				}
			}()
		}
	}()
	go func() {
		defer p.wg.Done()
		for {
			c, err := t.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				d.serveTCP(c)
			}()
		}
	}()
	return d, nil
}

func (d *dnsServer) close() {
	d.udp.Close()
	d.tcp.Close()
}

func addrOf(a net.Addr) netip.Addr {
	ap, _ := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap()
}

// serveTCP answers length-prefixed queries on one connection.
func (d *dnsServer) serveTCP(c net.Conn) {
	defer c.Close()
	from := addrOf(c.RemoteAddr())
	for {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		out := d.answer(from, q)
		if out == nil {
			return
		}
		binary.BigEndian.PutUint16(l[:], uint16(len(out)))
		if _, err := c.Write(append(l[:], out...)); err != nil {
			return
		}
	}
}

// answer builds the reply to query from the sandbox at from; nil drops a
// message that is not a query.
func (d *dnsServer) answer(from netip.Addr, query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	rules := d.p.lookup(from)
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	var addrs []netip.Addr
	switch {
	case rules == nil:
		rh.RCode = dnsmessage.RCodeRefused
	case !rules.Deny || rules.allowName(name):
		ctx, cancel := context.WithTimeout(d.p.ctx, 5*time.Second)
		addrs, err = d.p.cfg.Resolver.Lookup(ctx, name)
		cancel()
		var de *net.DNSError
		switch {
		case errors.As(err, &de) && de.IsNotFound:
			rh.RCode = dnsmessage.RCodeNameError
		case err != nil:
			rh.RCode = dnsmessage.RCodeServerFailure
		}
	default:
		d.p.log.Info("dns refused", "src", from, "name", name)
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if rh.RCode == dnsmessage.RCodeSuccess && q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		for _, a := range addrs {
			b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 30}, dnsmessage.AResource{A: a.As4()})
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
