# Mail::DKIM and Mail::AuthenticationResults (Debian's libmail-dkim-perl,
# libmail-authenticationresults-perl) as judges of mail pimail wrote
# (issue 22). Same input and output as mailauth.py: modes arc, dkim and
# authres; DNS questions go to the test's server (Net::DNS).
use strict;
use warnings;
use JSON::PP;
use MIME::Base64;
use Net::DNS;
use Mail::DKIM::Verifier;
use Mail::DKIM::ARC::Verifier;
use Mail::AuthenticationResults::Parser;

my $req = decode_json(do { local $/; <STDIN> });
my ($host, $port) = $req->{dns} =~ /^(.*):(\d+)$/;
Mail::DKIM::DNS::resolver(Net::DNS::Resolver->new(nameservers => [$host], port => $port,
    udp_timeout => 5, retry => 1, recurse => 0));

for my $b64 (@{ $req->{msgs} }) {
    my $msg = decode_base64($b64);
    $msg =~ s/\r?\n/\r\n/g;
    if ($req->{mode} eq 'arc') {
        my $v = Mail::DKIM::ARC::Verifier->new();
        $v->PRINT($msg);
        $v->CLOSE;
        print $v->result, " ", ($v->result_detail // ''), "\n";
    } elsif ($req->{mode} eq 'dkim') {
        my $v = Mail::DKIM::Verifier->new();
        $v->PRINT($msg);
        $v->CLOSE;
        my @r = map { my $r = $_->result; $r .= '(unsupported)' if $_->result_detail =~ /unsupported/i; $r } $v->signatures;
        print((@r ? join(' ', @r) : 'none'), "\n");
    } else {
        my ($header) = split /\r\n\r\n/, $msg, 2;
        $header =~ s/\r\n([ \t])/$1/g;
        my @errs;
        for my $line (split /\r\n/, $header) {
            next unless $line =~ /^Authentication-Results:(.*)$/i;
            my $value = $1;
            eval { Mail::AuthenticationResults::Parser->new()->parse($value); 1 } or push @errs, "$value: $@";
        }
        print(@errs ? 'ERR ' . join('; ', @errs) : 'ok');
        print "\n";
    }
}
