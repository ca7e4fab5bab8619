#!/usr/bin/awk -f
# Summarises scripts/gpu_check.sh's clock samples per step:
#   gpu_clocks.awk STEPS.tsv CLOCKS.csv
# STEPS.tsv: name TAB start TAB end (epoch seconds); CLOCKS.csv: epoch
# seconds, SM clock (MHz), power (W), temperature (C), clock-event reasons.
# Prints, per step with samples, their count, the SM clock's minimum, median
# and maximum, the mean and maximum power, and the reasons the driver gave
# for a lower clock (a bitmask in hex; 0x0 none, 0x4 software power cap, 0x20
# software thermal slowdown; nvidia-smi --help-query-gpu lists them all).
BEGIN { FS = "\t" }
FNR == NR { name[++steps] = $1; start[steps] = $2; stop[steps] = $3; next }
{
  split($0, f, /, */)
  n++; t[n] = f[1]; sm[n] = f[2]; watts[n] = f[3]; why[n] = f[5]
}
END {
  printf "%-28s %7s %6s %6s %6s %7s %7s  %s\n", "step", "samples", "min", "median", "max", "W mean", "W max", "reasons"
  for (s = 1; s <= steps; s++) {
    k = 0; sum = 0; peak = 0; reasons = ""
    delete clocks
    for (i = 1; i <= n; i++) {
      if (t[i] < start[s] || (stop[s] != "" && t[i] > stop[s]) || sm[i] !~ /^[0-9.]+$/) continue
      clocks[++k] = sm[i] + 0; sum += watts[i]; if (watts[i] + 0 > peak) peak = watts[i] + 0
      if (index(" " reasons " ", " " why[i] " ") == 0) reasons = reasons (reasons == "" ? "" : " ") why[i]
    }
    if (k == 0) continue
    for (i = 2; i <= k; i++) {  # insertion sort: a few thousand samples at most
      v = clocks[i]
      for (j = i - 1; j >= 1 && clocks[j] > v; j--) clocks[j + 1] = clocks[j]
      clocks[j + 1] = v
    }
    printf "%-28s %7d %6d %6d %6d %7.0f %7.0f  %s\n", name[s], k, clocks[1], clocks[int((k + 1) / 2)], clocks[k], sum / k, peak, reasons
  }
}
