#!/bin/sh
# Run from the repository root: sh test/tools/count-conversions.sh (docs/translation.md).
# Counts the API<->engine conversions in berth's non-test Go code.
# Files: controllers/ and cmd/ files that import the engine (berth/admission).
# A: plain functions (not methods) whose signature names both an engine type
#    (admission.X) and an API type (berthv1.X, autoscalingv1.X, corev1.X).
# B: inline casts of a value into an engine enum or name type, or into an API
#    enum type: admission.QueueingStrategy(...), berthv1.WorkloadReason(...), ...
files=$(grep -rl --include='*.go' '"github.com/berth-dev/berth/admission"' controllers cmd | grep -v '_test.go$')
a=$(grep -hE '^func [A-Za-z]' $files | grep -E '\badmission\.[A-Z]' | grep -cE '\b(berthv1|autoscalingv1|corev1)\.[A-Z]')
b=$(grep -hoE '\b(admission\.(QueueingStrategy|PreemptionMode|TopologyMode|BookingState|ProvisioningMode|ProvisioningClass|ResourceName|PendingReason|Answer)|berthv1\.(QueueingStrategy|PreemptionMode|StopPolicy|TopologyMode|ProvisioningState|ProvisioningMode|ProvisioningClass|WorkloadReason)|corev1\.ResourceName)\(' $files | wc -l)
p=$(for f in $files; do if grep -qE '^func [A-Za-z].*\badmission\.[A-Z].*\b(berthv1|autoscalingv1|corev1)\.[A-Z]|^func [A-Za-z].*\b(berthv1|autoscalingv1|corev1)\.[A-Z].*\badmission\.[A-Z]' $f; then dirname $f; fi; done | sort -u)
echo "conversion functions (A): $a"
echo "inline casts (B):         $b"
echo "total:                    $((a + b))"
echo "packages holding conversion functions:"; echo "$p" | sed 's/^/  /'
