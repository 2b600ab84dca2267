package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/execbox/execbox/internal/daemon/config"
	"github.com/execbox/execbox/internal/host/imagestore"
	"github.com/execbox/execbox/sandbox"
)

// openStore opens the configured image store: the state dir's images/.
func (g *globals) openStore() (*imagestore.Store, error) {
	cfg, _, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	_, stateDir, err := cfg.Dirs()
	if err != nil {
		return nil, err
	}
	return openStore(cfg, stateDir)
}

func openStore(cfg *config.Config, stateDir string) (*imagestore.Store, error) {
	return imagestore.Open(imagestore.Options{Dir: filepath.Join(stateDir, "images"), MaxBytes: cfg.ImageStore.MaxBytes})
}

// storeRoots is engine.Options.Roots: the store opened on first use (a
// run that names no image leaves the state dir alone), and again after a
// failure.
func storeRoots(cfg *config.Config, stateDir string) func(string) (*sandbox.RootImage, error) {
	var mu sync.Mutex
	var store *imagestore.Store
	return func(ref string) (*sandbox.RootImage, error) {
		mu.Lock()
		if store == nil {
			s, err := openStore(cfg, stateDir)
			if err != nil {
				mu.Unlock()
				return nil, sandbox.Errorf(sandbox.ErrUnavailable, "image_store_unavailable", "the image store: %v", err)
			}
			store = s
		}
		s := store
		mu.Unlock()
		img, err := s.Root(ref)
		if err != nil {
			return nil, err
		}
		return &sandbox.RootImage{Ref: ref, Digest: img.Digest, Dir: img.Root, Env: img.Env}, nil
	}
}

// addStoreCmds adds the image store's commands to cmd.
func addStoreCmds(cmd *cobra.Command, g *globals) {
	// withStore is a command's RunE that opens the store first.
	withStore := func(f func(cmd *cobra.Command, s *imagestore.Store, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			s, err := g.openStore()
			if err != nil {
				return err
			}
			return f(cmd, s, args)
		}
	}
	var asJSON bool
	report := func(imgs []imagestore.Image, verb string, start time.Time) error {
		if asJSON {
			return printJSON(imgs)
		}
		for _, img := range imgs {
			fmt.Printf("%s %s (%s) in %v: %d layers, %s, unpacked %s\n", verb, img.Refs[0], shortDigest(img.Digest),
				time.Since(start).Round(time.Millisecond), img.Layers, sandbox.FormatSize(img.Size), sandbox.FormatSize(img.Unpacked))
			if img.Dropped > 0 || img.Cleared > 0 {
				fmt.Fprintf(os.Stderr, "execbox: unpacking dropped %d device nodes, FIFOs or sockets and cleared %d setuid or setgid bits\n", img.Dropped, img.Cleared)
			}
		}
		return nil
	}
	pull := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from a registry into the store and unpack it",
		Long: `Pull an image (this host's platform of it) from any OCI or Docker registry into
the image store in the state dir, verify every digest and unpack it once, for
sandboxes to use as their root. Credentials come from docker's config file
($DOCKER_CONFIG or ~/.docker/config.json); registries on loopback are spoken
to over plain HTTP. The store is bounded by image_store.max_bytes.`,
		Args: cobra.ExactArgs(1),
		RunE: withStore(func(cmd *cobra.Command, s *imagestore.Store, args []string) error {
			start := time.Now()
			img, err := s.Pull(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return report([]imagestore.Image{img}, "pulled", start)
		}),
	}
	pull.Flags().BoolVar(&asJSON, "json", false, "print the image as JSON")
	var tag string
	imp := &cobra.Command{
		Use:   "import FILE",
		Short: "Import a docker save tar or an OCI layout into the store",
		Args:  cobra.ExactArgs(1),
		RunE: withStore(func(cmd *cobra.Command, s *imagestore.Store, args []string) error {
			start := time.Now()
			imgs, err := s.Import(args[0], tag)
			if err != nil {
				return err
			}
			return report(imgs, "imported", start)
		}),
	}
	imp.Flags().StringVar(&tag, "tag", "", "the name to store the image under (when the file names none, or to rename it)")
	imp.Flags().BoolVar(&asJSON, "json", false, "print the images as JSON")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the store's images",
		Args:  cobra.NoArgs,
		RunE: withStore(func(cmd *cobra.Command, s *imagestore.Store, args []string) error {
			imgs, err := s.List()
			if err != nil {
				return err
			}
			if asJSON {
				if imgs == nil {
					imgs = []imagestore.Image{}
				}
				return printJSON(imgs)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REFERENCE\tDIGEST\tSIZE\tUNPACKED\tCREATED")
			for _, img := range imgs {
				created := "-"
				if !img.Created.IsZero() {
					created = img.Created.UTC().Format(time.DateTime)
				}
				for _, r := range img.Refs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r, shortDigest(img.Digest), sandbox.FormatSize(img.Size), sandbox.FormatSize(img.Unpacked), created)
				}
			}
			return tw.Flush()
		}),
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print the images as JSON")
	inspect := &cobra.Command{
		Use:   "inspect REF",
		Short: "Print an image of the store as JSON (by reference or digest)",
		Args:  cobra.ExactArgs(1),
		RunE: withStore(func(cmd *cobra.Command, s *imagestore.Store, args []string) error {
			img, err := s.Inspect(args[0])
			if err != nil {
				return err
			}
			return printJSON(img)
		}),
	}
	rm := &cobra.Command{
		Use:   "rm REF...",
		Short: "Remove images from the store (a reference its name, a digest the image)",
		Args:  cobra.MinimumNArgs(1),
		RunE: withStore(func(cmd *cobra.Command, s *imagestore.Store, args []string) error {
			for _, ref := range args {
				if err := s.Remove(ref); err != nil {
					return err
				}
				fmt.Println("removed", ref)
			}
			return nil
		}),
	}
	prune := &cobra.Command{
		Use:   "prune",
		Short: "Remove what no image of the store uses",
		Args:  cobra.NoArgs,
		RunE: withStore(func(cmd *cobra.Command, s *imagestore.Store, args []string) error {
			freed, err := s.Prune()
			if err != nil {
				return err
			}
			fmt.Println("freed", sandbox.FormatSize(freed))
			return nil
		}),
	}
	cmd.AddCommand(pull, imp, ls, inspect, rm, prune)
}

// shortDigest is a digest's first 12 hex digits.
func shortDigest(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	return hex[:min(12, len(hex))]
}
