// A gRPC client that is not ferry: it compiles, at run time, the .proto
// that ferry-grpc emits for an interface (no protoc, no generated code),
// builds its request messages with dynamicpb and calls a ferry server with
// grpc-go, checking every answer. It exits non-zero on the first check that
// fails, naming it.
//
// Usage: interop -proto FILE -addr HOST:PORT -pid PID
//
// The interface is the test's `Calc` (tests/interop.rs); PID is the
// serving process, which a call from a client that is not ferry starts
// its logical thread in.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bufbuild/protocompile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// patience bounds every call that should answer: a hang fails the run
// instead of blocking it.
const patience = 60 * time.Second

type client struct {
	conn    *grpc.ClientConn
	service protoreflect.ServiceDescriptor
	checks  int
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "interop: FAIL: "+format+"\n", args...)
	os.Exit(1)
}

// method returns the descriptor of rpc `name`, failing if the .proto lacks it.
func (c *client) method(name string) protoreflect.MethodDescriptor {
	m := c.service.Methods().ByName(protoreflect.Name(name))
	if m == nil {
		fail("the .proto has no rpc %s", name)
	}
	return m
}

// request builds rpc `name`'s request message with `fields` set by name.
func (c *client) request(name string, fields map[string]protoreflect.Value) *dynamicpb.Message {
	md := c.method(name).Input()
	msg := dynamicpb.NewMessage(md)
	for k, v := range fields {
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			fail("message %s has no field %s", md.FullName(), k)
		}
		msg.Set(fd, v)
	}
	return msg
}

// invoke calls `path` with `req` under `ctx` and returns the reply of rpc
// `name`'s type.
func (c *client) invoke(ctx context.Context, path string, name string, req proto.Message) (*dynamicpb.Message, error) {
	reply := dynamicpb.NewMessage(c.method(name).Output())
	err := c.conn.Invoke(ctx, path, req, reply)
	return reply, err
}

// call calls rpc `name` with `fields` and returns its reply's `value`
// field; any error fails the run.
func (c *client) call(name string, fields map[string]protoreflect.Value) protoreflect.Value {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	path := fmt.Sprintf("/%s/%s", c.service.FullName(), name)
	reply, err := c.invoke(ctx, path, name, c.request(name, fields))
	if err != nil {
		fail("%s: %v", name, err)
	}
	fd := reply.Descriptor().Fields().ByName("value")
	if fd == nil {
		fail("%s's reply has no field value", name)
	}
	return reply.Get(fd)
}

// expectCode calls `path` with `req`, taking a reply of rpc `name`'s type,
// and checks that the call fails with `want`.
func (c *client) expectCode(ctx context.Context, what, path, name string, req proto.Message, want codes.Code) {
	_, err := c.invoke(ctx, path, name, req)
	if got := status.Code(err); got != want {
		fail("%s: want %v, got %v (%v)", what, want, got, err)
	}
	c.checks++
}

func (c *client) equal(what string, got, want any) {
	if got != want {
		fail("%s: got %v, want %v", what, got, want)
	}
	c.checks++
}

func main() {
	protoPath := flag.String("proto", "", "the interface's .proto (as ferry-grpc emits it)")
	addr := flag.String("addr", "", "the ferry server's host:port")
	pid := flag.Uint("pid", 0, "the serving process's pid")
	flag.Parse()
	if *protoPath == "" || *addr == "" || *pid == 0 {
		fail("usage: interop -proto FILE -addr HOST:PORT -pid PID")
	}

	// Compile the .proto as it is, with nothing but protocompile.
	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			ImportPaths: []string{filepath.Dir(*protoPath)},
		}),
	}
	files, err := compiler.Compile(context.Background(), filepath.Base(*protoPath))
	if err != nil {
		fail("compiling %s: %v", *protoPath, err)
	}
	service := files[0].Services().ByName("Calc")
	if service == nil {
		fail("the .proto has no service Calc")
	}
	if service.FullName() != "ferry.Calc" {
		fail("the service is %s, not ferry.Calc", service.FullName())
	}

	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail("connecting to %s: %v", *addr, err)
	}
	defer conn.Close()
	c := &client{conn: conn, service: service}

	// Plain types as ordinary messages.
	c.equal("Add(2, 40)", c.call("Add", map[string]protoreflect.Value{
		"a": protoreflect.ValueOfInt64(2),
		"b": protoreflect.ValueOfInt64(40),
	}).Int(), int64(42))
	// b absent from the wire: proto3's default, 0.
	c.equal("Add(-7, 0)", c.call("Add", map[string]protoreflect.Value{
		"a": protoreflect.ValueOfInt64(-7),
		"b": protoreflect.ValueOfInt64(0),
	}).Int(), int64(-7))
	c.equal("Greet(héllo)", c.call("Greet", map[string]protoreflect.Value{
		"name": protoreflect.ValueOfString("héllo"),
	}).String(), "hello héllo")
	c.equal("Count(héllo, [1 2 3])", c.call("Count", map[string]protoreflect.Value{
		"text":  protoreflect.ValueOfString("héllo"),
		"bytes": protoreflect.ValueOfBytes([]byte{1, 2, 3}),
	}).Uint(), uint64(5003))
	// A call from a client that is not ferry starts its logical thread in
	// the server's process.
	c.equal("OriginPid()", c.call("OriginPid", nil).Uint(), uint64(*pid))
	// Its deadline arrives as the server's: absent without one, present
	// with one (call sets a deadline of `patience`).
	ctx := context.Background()
	reply, err := c.invoke(ctx, "/ferry.Calc/HasDeadline", "HasDeadline", c.request("HasDeadline", nil))
	if err != nil {
		fail("HasDeadline without a deadline: %v", err)
	}
	c.equal("HasDeadline() without a deadline", reply.Get(reply.Descriptor().Fields().ByName("value")).Bool(), false)
	c.equal("HasDeadline() with a deadline", c.call("HasDeadline", nil).Bool(), true)

	// Faults as gRPC statuses.
	bounded, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	c.expectCode(bounded, "an rpc the service lacks", "/ferry.Calc/Nope", "Add",
		c.request("Add", nil), codes.Unimplemented)
	c.expectCode(bounded, "a service the server lacks", "/ferry.Nope/Add", "Add",
		c.request("Add", nil), codes.Unimplemented)
	// Greet's request (a string in field 1) where Add's (an int64) belongs.
	c.expectCode(bounded, "a message that is not the rpc's", "/ferry.Calc/Add", "Add",
		c.request("Greet", map[string]protoreflect.Value{"name": protoreflect.ValueOfString("x")}),
		codes.InvalidArgument)

	// A deadline that passes while the server holds the call (Hold waits
	// until it is alerted). Until the server says a Hold began, a longer
	// deadline is tried: on a busy machine the first may pass before the
	// request reaches the server at all.
	for _, d := range []time.Duration{300 * time.Millisecond, 2 * time.Second, 10 * time.Second} {
		short, cancelShort := context.WithTimeout(ctx, d)
		c.expectCode(short, fmt.Sprintf("Hold() past a deadline of %v", d), "/ferry.Calc/Hold", "Hold",
			c.request("Hold", nil), codes.DeadlineExceeded)
		cancelShort()
		if c.call("Holds", nil).Uint() > 0 {
			break
		}
	}
	if c.call("Holds", nil).Uint() == 0 {
		fail("no Hold ever reached the server")
	}

	// The connection still serves after all of that.
	c.equal("Add(1, 1) at the end", c.call("Add", map[string]protoreflect.Value{
		"a": protoreflect.ValueOfInt64(1),
		"b": protoreflect.ValueOfInt64(1),
	}).Int(), int64(2))

	fmt.Printf("interop: %d checks passed\n", c.checks)
}
