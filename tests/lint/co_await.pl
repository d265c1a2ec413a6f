#!/usr/bin/perl -0777 -n
# Reports each `co_await` inside a conditional expression (?:, && or ||) in the C++ files given;
# see co_await.sh for why. Raw strings, comments, strings and character literals are blanked
# first (line breaks kept, so line numbers stay right).
use strict;
use warnings;
my $blank = sub { (my $t = $_[0]) =~ s/[^\n]//g; $t };
s{(R"([^(\s]*)\(.*?\)\2"|//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')}{$blank->($1)}gse;
while (/(\?|&&|\|\|)([^;{}]*?)\bco_await\b/gs) {
  my ($between, $line) = ($2, (substr($_, 0, $-[0]) =~ tr/\n//) + 1);
  # Inside the same expression only: `while (a && b) co_await x;` closes the condition first.
  my ($depth, $inside) = (0, 1);
  for my $c (split //, $between) {
    $depth += $c eq '(' ? 1 : $c eq ')' ? -1 : 0;
    $inside = 0 if $depth < 0;
  }
  next unless $inside;
  print "$ARGV:$line: co_await inside a conditional expression\n";
}
