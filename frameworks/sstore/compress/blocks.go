package compress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"

	"gompi/frameworks/sstore/blocks"
	"gompi/frameworks/sstore/snapshot"
)

// BlockEncoder returns the blocks.Encoder of a differential checkpoint:
// each changed block compressed by itself with alg at level after filter
// (the file's Choice), or stored as is when alg is None or the block does
// not shrink. Per block, not the file shuffled first: a block must decode
// alone, and the filters work in 1 MiB pieces anyway, so a block of 1 MiB
// compresses as the whole file's piece would.
func BlockEncoder(ctx context.Context, alg string, level int, choice Choice) blocks.Encoder {
	var tmp bytes.Buffer
	return func(dst io.Writer, block []byte) (string, string, error) {
		if alg != None && choice.Compress {
			tmp.Reset()
			st, err := CompressFiltered(ctx, &tmp, bytes.NewReader(block), alg, level, choice.Filter)
			if err != nil {
				return "", "", err
			}
			if st.Out < st.In {
				_, err := dst.Write(tmp.Bytes())
				return alg, choice.Filter, err
			}
		}
		_, err := dst.Write(block)
		return blocks.None, "", err
	}
}

// DecodeBlock is the blocks.Decoder of BlockEncoder's blocks.
func DecodeBlock(ctx context.Context, dst io.Writer, src io.Reader, enc, filter string) error {
	if enc == blocks.None {
		_, err := io.Copy(dst, src)
		return err
	}
	_, err := DecompressFiltered(ctx, dst, src, enc, filter)
	return err
}

// VerifyBlocks checks the file rec of the local snapshot in dir (a rank
// folder of a reference on this node) stored as blocks: its manifest read
// and every block reassembled from the packs of its sequence and the older
// ones, verified, nothing written. seq is the sequence of dir.
func VerifyBlocks(ctx context.Context, dir string, seq int, rec snapshot.FileRecord) error {
	m, err := blocks.ReadManifest(filepath.Join(dir, rec.Blocks), seq)
	if err != nil {
		return fmt.Errorf("decompress: %w", err)
	}
	if err := blocks.Reassemble(ctx, m, rec, blocks.DirOpener(dir), DecodeBlock, io.Discard); err != nil {
		return fmt.Errorf("decompress: %s: %w", filepath.Join(dir, rec.Blocks), err)
	}
	return nil
}
