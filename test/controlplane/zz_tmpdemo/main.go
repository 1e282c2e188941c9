package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/berth-dev/berth/test/controlplane"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func main() {
	ctx := context.Background()
	t := time.Now()
	p, err := controlplane.Start(ctx, controlplane.Options{Full: true, Dir: "/tmp/plane-demo"})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("started in", time.Since(t))
	c, _ := client.New(p.Config, client.Options{})
	n := controlplane.GPUNode("h200-0", 8, nil)
	if err := c.Create(ctx, n); err != nil {
		panic(err)
	}
	t = time.Now()
	fmt.Println(controlplane.WaitForNodeReady(ctx, c, n.Name), time.Since(t))
	out, _ := exec.Command("kubectl", "--kubeconfig", p.Kubeconfig, "get", "nodes", "-o", "wide", "--show-labels").CombinedOutput()
	fmt.Println(string(out))
	out, _ = exec.Command("kubectl", "--kubeconfig", p.Kubeconfig, "get", "sa,cm", "-A").CombinedOutput()
	fmt.Println(string(out))
	out, _ = exec.Command("kubectl", "--kubeconfig", p.Kubeconfig, "version").CombinedOutput()
	fmt.Println(string(out))
	if len(os.Args) > 1 {
		d, _ := time.ParseDuration(os.Args[1])
		time.Sleep(d)
		out, _ = exec.Command("kubectl", "--kubeconfig", p.Kubeconfig, "get", "nodes", "-o", "yaml").CombinedOutput()
		fmt.Println(string(out))
	}
	t = time.Now()
	fmt.Println("stop", p.Stop(), time.Since(t))
}
