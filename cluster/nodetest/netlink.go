package nodetest

import (
	"encoding/binary"
	"fmt"
	"net"
	"syscall"
)

// deleteLink deletes the network interface name (the node's CNI bridge)
// with an RTM_DELLINK netlink request, so that Stop needs no ip(8). A
// missing interface is not an error.
func deleteLink(name string) error {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return err
	}
	const hdrLen, ifiLen = syscall.SizeofNlMsghdr, syscall.SizeofIfInfomsg
	msg := make([]byte, hdrLen+ifiLen)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], syscall.RTM_DELLINK)
	ne.PutUint16(msg[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_ACK)
	ne.PutUint32(msg[8:], 1) // sequence number
	msg[hdrLen] = syscall.AF_UNSPEC
	ne.PutUint32(msg[hdrLen+4:], uint32(int32(ifc.Index)))
	if err := syscall.Sendto(fd, msg, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == syscall.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(ne.Uint32(m.Data[:4])); code != 0 {
				return fmt.Errorf("delete link %s: %w", name, syscall.Errno(-code))
			}
			return nil
		}
	}
	return fmt.Errorf("delete link %s: no netlink acknowledgement", name)
}
