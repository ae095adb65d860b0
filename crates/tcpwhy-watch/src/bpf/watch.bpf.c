// SPDX-License-Identifier: GPL-2.0
// tcpwhy watch: BPF programs on TCP tracepoints only (no kprobes, no fentry: this project's
// kernels may have neither). Per-socket state lives in LRU hash maps keyed by the socket's
// address; an event goes to user space only when something is decided: a connect() that
// ended (established or failed, with its SYN retries and resets), a timeout (loss state).
//
// Kernel structures are declared here with only the fields read, marked
// preserve_access_index: the loader relocates each field's offset against the running
// kernel's BTF (CO-RE), so no vmlinux.h is needed and one object runs on many kernels.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_FIN_WAIT1 4
#define TCP_CLOSE 7
#define TCP_CLOSE_WAIT 8
#define TCP_LAST_ACK 9
#define TCP_CLOSING 11
#define TCP_CA_RECOVERY 3
#define TCP_CA_LOSS 4

// ---- kernel types (only the fields read; offsets relocated from BTF) ----

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct sock_common {
	volatile unsigned char skc_state;
	possible_net_t skc_net;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	__u32 icsk_rto;
	__u8 icsk_ca_state : 5;
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 srtt_us;
	__u32 mss_cache;
	__u32 snd_cwnd;
	__u32 rcv_tstamp;
} __attribute__((preserve_access_index));

// Tracepoint records, as /sys/kernel/tracing/events/*/*/format lays them out (the 8-byte
// common header first). These are read directly, not relocated: the record's layout is the
// tracepoint's ABI, and its class name changes between kernels. User space checks each
// offset used here against the running kernel's format file before attaching
// (src/format.rs) and leaves a program unattached, saying so, when one differs.
struct tp_common {
	__u64 common;
};

struct tp_inet_sock_set_state {
	struct tp_common h;
	const void *skaddr;     // 8
	int oldstate;           // 16
	int newstate;           // 20
	__u16 sport;            // 24
	__u16 dport;            // 26
	__u16 family;           // 28
	__u16 protocol;         // 30
	__u8 saddr[4];          // 32
	__u8 daddr[4];          // 36
	__u8 saddr_v6[16];      // 40
	__u8 daddr_v6[16];      // 56
};

struct tp_tcp_retransmit_skb {
	struct tp_common h;
	const void *skbaddr;    // 8
	const void *skaddr;     // 16
	int state;              // 24
	__u16 sport;            // 28
	__u16 dport;            // 30
	__u16 family;           // 32
	__u8 saddr[4];          // 34
	__u8 daddr[4];          // 38
	__u8 saddr_v6[16];      // 42
	__u8 daddr_v6[16];      // 58
};

struct tp_tcp_send_reset {
	struct tp_common h;
	const void *skbaddr;    // 8
	const void *skaddr;     // 16
	int state;              // 24
	unsigned int reason;    // 28
};

struct tp_tcp_receive_reset {
	struct tp_common h;
	const void *skaddr;     // 8
};

struct tp_tcp_cong_state_set {
	struct tp_common h;
	const void *skaddr;     // 8
	__u16 sport;            // 16
	__u16 dport;            // 18
	__u16 family;           // 20
	__u8 saddr[4];          // 22
	__u8 daddr[4];          // 26
	__u8 saddr_v6[16];      // 30
	__u8 daddr_v6[16];      // 46
	__u8 cong_state;        // 62
};

// ---- what is kept and what is sent ----

// Set by user space before loading: 0 = everything.
const volatile __u32 target_tgid = 0;
const volatile __u32 target_netns = 0;
// The cgroup (v2) id, the inode number of its directory: 0 = every cgroup.
const volatile __u64 target_cgroup = 0;
// 1: every connect() is an event (`--connections`); 0: only those with a SYN retransmission
// or a reset, the others counted in `connect_hist` without waking user space.
const volatile __u32 send_all_connects = 0;

// A connect() in progress (SYN-SENT).
struct opening {
	__u64 syn_ns;      // the socket entered SYN-SENT: the first SYN
	__u64 last_syn_ns; // the last SYN sent (the first, or a retransmission)
	__u32 syn_retx;    // SYN retransmissions
	__u32 rst_sent;    // resets this socket sent in SYN-SENT (to an unacceptable ACK)
	__u32 rst_reason;  // the last one's reason (enum sk_rst_reason)
	__u32 rst_recv;    // resets received in SYN-SENT (refused)
	__u64 rst_sent_ns; // when the first one was sent
};

// What is kept per socket that called connect(), from SYN-SENT to close: its owner (timeouts
// later are attributed to it) and, while in SYN-SENT, the opening.
struct sockinfo {
	__u32 tgid;
	__u32 opening; // 1 while in SYN-SENT
	__u64 cgroup;  // the caller's cgroup (v2) id
	char comm[16];
	struct opening o;
};

#define EV_CONNECT 1
#define EV_LOSS 2
#define EV_PROBE 3

struct event {
	__u64 ts_ns;  // CLOCK_MONOTONIC (bpf_ktime_get_ns)
	__u64 sk;     // the socket's address: one connection while it lives
	__u32 kind;
	__u32 netns;
	__u32 tgid;
	__u32 newstate;
	char comm[16];
	__u16 family;
	__u16 sport;
	__u16 dport;
	__u16 pad;
	__u8 saddr[16];
	__u8 daddr[16];
	struct opening o;
	__u32 srtt_us;
	__u32 rto_jiffies;
	__u32 cwnd;
	__u32 mss;
	__u32 rcv_tstamp;  // jiffies of the last ACK received (tp->rcv_tstamp)
	__u32 rcv_age;     // jiffies since then
	__u32 ca_state;    // the congestion state (Open 0, Disorder 1, CWR 2, Recovery 3, Loss 4)
	__u32 pad2;
	__u64 cgroup;      // the connect() caller's cgroup (v2) id, 0 when not known
};

// src/event.rs reads this layout; the size is checked on both sides.
_Static_assert(sizeof(struct event) == 168, "struct event is 168 bytes");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct sockinfo);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

// Events that found the ring buffer full: counted, and reported by user space.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

// Connect latencies not sent as events, in buckets at most 6.25% wide (`bucket` below; the
// same function is in src/lib.rs).
#define HIST_BUCKETS 608
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HIST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} connect_hist SEC(".maps");

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

// A duration in ns -> its bucket: exact below 16 ns, then 16 per power of two (the four bits
// after the highest), up to 2^40 ns (18 minutes; longer ones land in the last bucket).
static __always_inline __u32 bucket(__u64 ns)
{
	if (ns < 16)
		return ns;
	__u32 l = log2_u64(ns);
	__u32 b = (l - 3) * 16 + ((ns >> (l - 4)) & 15);
	return b < HIST_BUCKETS ? b : HIST_BUCKETS - 1;
}

static __always_inline __u32 netns_of(const void *skaddr)
{
	const struct sock *sk = skaddr;
	return BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
}

static __always_inline int wanted_netns(__u32 ns)
{
	return target_netns == 0 || target_netns == ns;
}

static __always_inline struct event *reserve(void)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__u32 k = 0;
		__u64 *n = bpf_map_lookup_elem(&lost, &k);
		if (n)
			__sync_fetch_and_add(n, 1);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = bpf_ktime_get_ns();
	return e;
}

static __always_inline void read_tcp(struct event *e, const void *skaddr)
{
	const struct tcp_sock *tp = skaddr;
	const struct inet_connection_sock *icsk = skaddr;
	e->srtt_us = BPF_CORE_READ(tp, srtt_us) >> 3;
	e->mss = BPF_CORE_READ(tp, mss_cache);
	e->cwnd = BPF_CORE_READ(tp, snd_cwnd);
	e->rto_jiffies = BPF_CORE_READ(icsk, icsk_rto);
	e->rcv_tstamp = BPF_CORE_READ(tp, rcv_tstamp);
	e->rcv_age = (__u32)bpf_jiffies64() - e->rcv_tstamp;
	e->ca_state = BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_ca_state);
}

static __always_inline unsigned char state_of(const void *skaddr)
{
	const struct sock *s = skaddr;
	return BPF_CORE_READ(s, __sk_common.skc_state);
}

// A socket that carries data (a timeout there makes someone wait for data).
static __always_inline int data_state(const void *skaddr)
{
	unsigned char state = state_of(skaddr);
	return state == TCP_ESTABLISHED || state == TCP_FIN_WAIT1 || state == TCP_CLOSE_WAIT ||
	       state == TCP_LAST_ACK || state == TCP_CLOSING;
}

// Fills the event's socket fields and sends it, unless filtered out.
static __always_inline void send_socket_event(__u32 kind, __u64 sk, const void *skaddr,
					      __u16 family, __u16 sport, __u16 dport,
					      const __u8 *saddr, const __u8 *daddr,
					      const __u8 *saddr_v6, const __u8 *daddr_v6)
{
	struct sockinfo *si = bpf_map_lookup_elem(&socks, &sk);
	if (target_tgid && (!si || si->tgid != target_tgid))
		return;
	if (target_cgroup && (!si || si->cgroup != target_cgroup))
		return;
	__u32 ns = netns_of(skaddr);
	if (!wanted_netns(ns))
		return;
	struct event *e = reserve();
	if (!e)
		return;
	e->kind = kind;
	e->sk = sk;
	e->family = family;
	e->sport = sport;
	e->dport = dport;
	// Copied with a helper: the verifier refuses a load through a pointer into the
	// record that was computed rather than written as a constant offset.
	if (family == AF_INET6) {
		bpf_probe_read_kernel(e->saddr, 16, saddr_v6);
		bpf_probe_read_kernel(e->daddr, 16, daddr_v6);
	} else {
		bpf_probe_read_kernel(e->saddr, 4, saddr);
		bpf_probe_read_kernel(e->daddr, 4, daddr);
	}
	e->netns = ns;
	if (si) {
		e->tgid = si->tgid;
		e->cgroup = si->cgroup;
		__builtin_memcpy(e->comm, si->comm, 16);
	}
	read_tcp(e, skaddr);
	bpf_ringbuf_submit(e, 0);
}

SEC("tracepoint/sock/inet_sock_set_state")
int on_state(struct tp_inet_sock_set_state *ctx)
{
	if (ctx->protocol != IPPROTO_TCP)
		return 0;
	__u64 sk = (__u64)ctx->skaddr;
	int old = ctx->oldstate, new = ctx->newstate;
	if (new == TCP_SYN_SENT) {
		// connect(): process context, so the caller is the owner.
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;
		if (target_tgid && tgid != target_tgid)
			return 0;
		if (target_netns && !wanted_netns(netns_of(ctx->skaddr)))
			return 0;
		__u64 cgroup = bpf_get_current_cgroup_id();
		if (target_cgroup && cgroup != target_cgroup)
			return 0;
		struct sockinfo si = {.tgid = tgid, .opening = 1, .cgroup = cgroup};
		bpf_get_current_comm(si.comm, sizeof(si.comm));
		__u64 now = bpf_ktime_get_ns();
		si.o.syn_ns = now;
		si.o.last_syn_ns = now;
		bpf_map_update_elem(&socks, &sk, &si, BPF_ANY);
		return 0;
	}
	if (old == TCP_SYN_SENT) {
		struct sockinfo *si = bpf_map_lookup_elem(&socks, &sk);
		if (!si || !si->opening)
			return 0;
		si->opening = 0;
		struct opening *o = &si->o;
		int clean = new == TCP_ESTABLISHED && o->syn_retx == 0 && o->rst_sent == 0 &&
			    o->rst_recv == 0;
		if (clean && !send_all_connects) {
			__u32 b = bucket(bpf_ktime_get_ns() - o->syn_ns);
			__u64 *n = bpf_map_lookup_elem(&connect_hist, &b);
			if (n)
				*n += 1;
			return 0;
		}
		struct event *e = reserve();
		if (e) {
			e->kind = EV_CONNECT;
			e->sk = sk;
			e->newstate = new;
			e->o = *o;
			e->family = ctx->family;
			e->sport = ctx->sport;
			e->dport = ctx->dport;
			if (ctx->family == AF_INET6) {
				__builtin_memcpy(e->saddr, ctx->saddr_v6, 16);
				__builtin_memcpy(e->daddr, ctx->daddr_v6, 16);
			} else {
				__builtin_memcpy(e->saddr, ctx->saddr, 4);
				__builtin_memcpy(e->daddr, ctx->daddr, 4);
			}
			e->netns = netns_of(ctx->skaddr);
			e->tgid = si->tgid;
			e->cgroup = si->cgroup;
			__builtin_memcpy(e->comm, si->comm, 16);
			read_tcp(e, ctx->skaddr);
			bpf_ringbuf_submit(e, 0);
		}
		if (new == TCP_CLOSE)
			bpf_map_delete_elem(&socks, &sk);
		return 0;
	}
	if (new == TCP_CLOSE)
		bpf_map_delete_elem(&socks, &sk);
	return 0;
}

SEC("tracepoint/tcp/tcp_retransmit_skb")
int on_retransmit(struct tp_tcp_retransmit_skb *ctx)
{
	__u64 sk = (__u64)ctx->skaddr;
	if (ctx->state == TCP_SYN_SENT) {
		struct sockinfo *si = bpf_map_lookup_elem(&socks, &sk);
		if (!si || !si->opening)
			return 0;
		si->o.syn_retx += 1;
		si->o.last_syn_ns = bpf_ktime_get_ns();
		return 0;
	}
	if (!data_state(ctx->skaddr))
		return 0;
	// A resend outside Recovery and Loss is a tail loss probe (its timer fired: nothing came
	// back for about two round trips). Recovery's resends are fast retransmits (no timer);
	// Loss's are the RTO's, announced once per expiry by tcp_cong_state_set.
	const struct inet_connection_sock *icsk = ctx->skaddr;
	__u8 ca = BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_ca_state);
	if (ca == TCP_CA_RECOVERY || ca == TCP_CA_LOSS)
		return 0;
	send_socket_event(EV_PROBE, sk, ctx->skaddr, ctx->family, ctx->sport, ctx->dport,
			  ctx->saddr, ctx->daddr, ctx->saddr_v6, ctx->daddr_v6);
	return 0;
}

SEC("tracepoint/tcp/tcp_send_reset")
int on_send_reset(struct tp_tcp_send_reset *ctx)
{
	if (ctx->state != TCP_SYN_SENT || !ctx->skaddr)
		return 0;
	__u64 sk = (__u64)ctx->skaddr;
	struct sockinfo *si = bpf_map_lookup_elem(&socks, &sk);
	if (!si || !si->opening)
		return 0;
	if (si->o.rst_sent == 0)
		si->o.rst_sent_ns = bpf_ktime_get_ns();
	si->o.rst_sent += 1;
	si->o.rst_reason = ctx->reason;
	return 0;
}

SEC("tracepoint/tcp/tcp_receive_reset")
int on_receive_reset(struct tp_tcp_receive_reset *ctx)
{
	// Only a socket in SYN-SENT: read its state before any map lookup (every reset a
	// server receives comes here too).
	if (state_of(ctx->skaddr) != TCP_SYN_SENT)
		return 0;
	__u64 sk = (__u64)ctx->skaddr;
	struct sockinfo *si = bpf_map_lookup_elem(&socks, &sk);
	if (!si || !si->opening)
		return 0;
	si->o.rst_recv += 1;
	return 0;
}

SEC("tracepoint/tcp/tcp_cong_state_set")
int on_cong_state(struct tp_tcp_cong_state_set *ctx)
{
	if (ctx->cong_state != TCP_CA_LOSS)
		return 0;
	// Only a socket that carries data: in SYN-SENT the SYN's own retransmission timer also
	// enters Loss (after an RST to a stale ACK it fires 2 jiffies later), with the initial
	// 1 s RTO that nobody waited for; those belong to the connect() records.
	if (!data_state(ctx->skaddr))
		return 0;
	send_socket_event(EV_LOSS, (__u64)ctx->skaddr, ctx->skaddr, ctx->family, ctx->sport,
			  ctx->dport, ctx->saddr, ctx->daddr, ctx->saddr_v6, ctx->daddr_v6);
	return 0;
}
