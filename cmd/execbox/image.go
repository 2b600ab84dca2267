package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/execbox/execbox/backend/docker"
	"github.com/execbox/execbox/internal/host/image"
	"github.com/execbox/execbox/sandbox"
)

// newImageCmd is `execbox image`: the image store (pull, import, ls,
// inspect, rm, prune) and `build NAME [--offline]`, the docker backend's
// sandbox images.
func newImageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Pull, import and list images; build the docker backend's sandbox images",
	}
	addStoreCmds(cmd, g)
	var offline bool
	var tag, root string
	build := &cobra.Command{
		Use:   "build NAME",
		Short: "Build a sandbox image into the configured Docker engine",
		Long: `Build a sandbox image (` + strings.Join(image.Names(), ", ") + `) into the Docker engine of
docker.host / DOCKER_HOST and tag it (default: docker.image for python,
else execbox-NAME:latest).

Without --offline the engine builds internal/host/image/dockerfiles/NAME/Dockerfile, which pulls its
slim base image from a registry. With --offline no registry is used at all:
the image is made from this host's own files (the Debian packages of the
interpreter, a shell and coreutils, and every library they load) and
imported through the Engine API, in seconds — for CI and air-gapped hosts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := g.loadConfig()
			if err != nil {
				return err
			}
			dc := cfg.BackendConfig(docker.Name).(*docker.Config)
			name := args[0]
			ref := tag
			if ref == "" {
				ref = "execbox-" + name + ":latest"
				if name == "python" && dc.Image != "" {
					ref = dc.Image
				}
			}
			out := cmd.OutOrStdout()
			start := time.Now()
			if !offline {
				id, err := docker.BuildDockerfile(cmd.Context(), dc.Host, name, ref, out)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "built %s (%s) from internal/host/image/dockerfiles/%s/Dockerfile in %v\n", ref, id, name, time.Since(start).Round(time.Millisecond))
				return nil
			}
			r, err := image.Lookup(name, root)
			if err != nil {
				return sandbox.Errorf(sandbox.ErrInvalid, "image_unknown", "%w", err)
			}
			st, id, err := docker.ImportOffline(cmd.Context(), dc.Host, r, ref, image.Options{Root: root})
			if err != nil {
				return err
			}
			for _, m := range st.Missing {
				fmt.Fprintf(cmd.ErrOrStderr(), "execbox: warning: library not on this host: %s\n", m)
			}
			fmt.Fprintf(out, "built %s (%s) offline from the host's files in %v: %d files (%.1f MiB), %d directories, %d symlinks\n",
				ref, id, time.Since(start).Round(time.Millisecond), st.Files, float64(st.Bytes)/sandbox.MiB, st.Dirs, st.Symlinks)
			return nil
		},
	}
	build.Flags().BoolVar(&offline, "offline", false, "make the image from this host's files; no registry")
	build.Flags().StringVar(&tag, "tag", "", "image reference to tag (default: docker.image for python)")
	build.Flags().StringVar(&root, "root", "/", "with --offline: the tree to take files from (a debootstrap dir)")
	build.ValidArgs = image.Names()
	cmd.AddCommand(build)
	return cmd
}
