// Package slots computes Redis Cluster's hash slots, which the Redis
// store places its shards by and the tests' private clusters are checked
// with.
package slots

import "strings"

// Count is how many hash slots a Redis Cluster has.
const Count = 16384

// Of returns the hash slot of key as Redis Cluster computes it: CRC16
// (XMODEM) of the key modulo 16384, where only the hash tag is hashed when
// the key has one: the bytes between the first '{' and the first '}' after
// it, if there is at least one. So "{user1}.a" and "{user1}.b" share a
// slot, while "x{}y" and "{}{b}" hash whole.
func Of(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(CRC16(key) % Count)
}

// CRC16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0) of s, the
// checksum Redis Cluster hashes keys with.
func CRC16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
